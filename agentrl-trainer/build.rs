//! Build script: lets this crate's binaries, tests, benches and examples find libtorch at run time.
//!
//! torch-sys passes its rpath only to its own compile, so a crate that links tch must add it
//! itself. torch-sys (`links = "tch"`) reports its library folder as `DEP_TCH_LIBTORCH_LIB`; when
//! torch-sys is not a dependency (e.g. a build without the `tch` feature) this does nothing.

use std::env;
use std::path::Path;

/// Prints the rpath to libtorch and, for a CUDA libtorch, forces `libtorch.so` to be linked.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let Some(dir) = env::var_os("DEP_TCH_LIBTORCH_LIB") else {
        return;
    };
    let dir = Path::new(&dir);
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    // With --as-needed the linker drops the libtorch.so stub, so libtorch_cuda.so is never
    // loaded and CUDA is silently unavailable. Only for a CUDA libtorch: in the CPU layout the
    // stub would try to load the missing libtorch_cuda.so at start.
    if dir.join("libtorch_cuda.so").exists() {
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg=-ltorch");
    }
}
