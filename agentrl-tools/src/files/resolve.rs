//! Turning a model-given relative path into a host path that is certainly inside the workspace.

use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use agentrl_core::{ToolContext, ToolError};

/// The session workspace as a canonical path; an error when the context has none.
pub(crate) fn workspace_root(ctx: &ToolContext, tool: &str) -> Result<PathBuf, ToolError> {
    let Some(workspace) = &ctx.workspace else {
        return Err(ToolError::Failed(format!(
            "`{tool}` needs a session workspace, and this session has none"
        )));
    };
    workspace.canonicalize().map_err(|e| {
        ToolError::Failed(format!(
            "the session workspace {} cannot be opened: {e}",
            workspace.display()
        ))
    })
}

/// The plain names of `path`, refusing absolute paths and `..`; `.` parts are dropped.
pub(crate) fn relative_parts(path: &str) -> Result<Vec<&str>, ToolError> {
    let refuse = |why: &str| {
        Err(ToolError::InvalidArguments(format!(
            "path `{path}` {why}; give a path relative to the workspace, without `..`"
        )))
    };
    if path.contains('\0') {
        return refuse("contains a NUL byte");
    }
    let mut parts = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(name) => match name.to_str() {
                Some(name) => parts.push(name),
                None => return refuse("is not valid UTF-8"),
            },
            Component::CurDir => {}
            Component::ParentDir => return refuse("goes up with `..`"),
            Component::RootDir | Component::Prefix(_) => return refuse("is absolute"),
        }
    }
    Ok(parts)
}

/// Canonicalises an existing `path` under `root` and checks it is still inside.
pub(crate) fn existing(root: &Path, path: &str) -> Result<PathBuf, ToolError> {
    let parts = relative_parts(path)?;
    let joined = parts
        .iter()
        .fold(root.to_path_buf(), |p, name| p.join(name));
    let resolved = joined.canonicalize().map_err(|e| match e.kind() {
        ErrorKind::NotFound => {
            ToolError::Failed(format!("`{path}` does not exist in the workspace"))
        }
        _ => ToolError::Failed(format!("cannot open `{path}`: {e}")),
    })?;
    inside(root, &resolved, path)?;
    Ok(resolved)
}

/// Where to write `path` under `root`: missing parent directories are created (only below a
/// parent whose canonical path is inside the workspace), an existing target must resolve inside
/// the workspace and not be a directory.
pub(crate) fn for_write(root: &Path, path: &str) -> Result<PathBuf, ToolError> {
    let parts = relative_parts(path)?;
    let Some((file, dirs)) = parts.split_last() else {
        return Err(ToolError::InvalidArguments(format!(
            "path `{path}` names the workspace itself; give a file name"
        )));
    };
    let mut dir = root.to_path_buf();
    for name in dirs {
        let next = dir.join(name);
        match std::fs::symlink_metadata(&next) {
            Ok(_) => {
                let resolved = next.canonicalize().map_err(|e| {
                    ToolError::Failed(format!("cannot open a parent of `{path}`: {e}"))
                })?;
                inside(root, &resolved, path)?;
                if !resolved.is_dir() {
                    return Err(ToolError::Failed(format!(
                        "cannot write `{path}`: `{name}` is not a directory"
                    )));
                }
                dir = resolved;
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {
                std::fs::create_dir(&next).map_err(|e| {
                    ToolError::Failed(format!(
                        "cannot create the directory `{name}` for `{path}`: {e}"
                    ))
                })?;
                dir = next;
            }
            Err(e) => {
                return Err(ToolError::Failed(format!(
                    "cannot open a parent of `{path}`: {e}"
                )));
            }
        }
    }
    let target = dir.join(file);
    match std::fs::symlink_metadata(&target) {
        Ok(_) => {
            let resolved = target.canonicalize().map_err(|_| {
                ToolError::InvalidArguments(format!(
                    "path `{path}` is a symbolic link to a missing target; it cannot be written"
                ))
            })?;
            inside(root, &resolved, path)?;
            if resolved.is_dir() {
                return Err(ToolError::Failed(format!("`{path}` is a directory")));
            }
            Ok(resolved)
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(target),
        Err(e) => Err(ToolError::Failed(format!("cannot open `{path}`: {e}"))),
    }
}

/// Refuses a canonical `resolved` path outside the canonical `root`.
fn inside(root: &Path, resolved: &Path, path: &str) -> Result<(), ToolError> {
    if resolved.starts_with(root) {
        Ok(())
    } else {
        Err(ToolError::InvalidArguments(format!(
            "path `{path}` resolves outside the workspace (through a symbolic link); only files \
             inside the workspace can be used"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_checks() {
        assert_eq!(relative_parts("./a/b.txt").unwrap(), ["a", "b.txt"]);
        assert!(relative_parts("").unwrap().is_empty());
        for bad in ["/etc/passwd", "../x", "a/../../x", "a\0b"] {
            assert!(
                matches!(relative_parts(bad), Err(ToolError::InvalidArguments(_))),
                "{bad}"
            );
        }
    }
}
