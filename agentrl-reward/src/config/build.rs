//! Checking a [`RewardConfig`] tree and building its reward functions.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use agentrl_core::{Error, Result, RewardFn};
use agentrl_tools::SandboxConfig;

use super::{RewardConfig, WeightedTermConfig};
use crate::{
    Clip, CommandCheck, Efficiency, Execution, FormatReward, Gate, IncompletePunishment,
    JudgeBackend, JudgeSettings, Length, LengthPenalty, LlmJudge, OutcomeReward, RunningNorm,
    SandboxCheck, ScaleOffset, ScoreReward, ScoreScale, ToolFormat, TurnShaping, WeightedSum,
};

/// What building a reward may need besides the config: the backends of model-based rewards.
#[derive(Clone, Default)]
pub struct RewardContext {
    /// The model behind every `llm_judge` in the tree; `None` makes an `llm_judge` an error.
    pub judge: Option<Arc<dyn JudgeBackend>>,
}

impl RewardContext {
    /// A context whose `llm_judge` rewards ask `backend`.
    pub fn with_judge(backend: Arc<dyn JudgeBackend>) -> Self {
        RewardContext {
            judge: Some(backend),
        }
    }
}

impl std::fmt::Debug for RewardContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RewardContext")
            .field("judge", &self.judge.as_ref().map(|_| "JudgeBackend"))
            .finish()
    }
}

impl RewardConfig {
    /// Checks the values and builds the reward function; errors are [`Error::Config`] naming
    /// the offending field (e.g. `reward.terms[1].weight`). An `llm_judge` needs
    /// [`RewardConfig::build_with`].
    pub fn build(&self) -> Result<Box<dyn RewardFn>> {
        self.build_with(&RewardContext::default())
    }

    /// Like [`RewardConfig::build`], with the backends in `context` (e.g. the judge model).
    pub fn build_with(&self, context: &RewardContext) -> Result<Box<dyn RewardFn>> {
        self.build_at("reward", context)
    }

    /// Whether the tree contains an `llm_judge` (and so needs a judge backend to build).
    pub fn needs_judge(&self) -> bool {
        matches!(self, RewardConfig::LlmJudge { .. })
            || self.children().iter().any(|c| c.needs_judge())
    }

    /// The keys of the parts this reward's breakdown will contain.
    pub fn part_names(&self) -> Vec<&'static str> {
        match self {
            RewardConfig::Outcome { .. } => vec![OutcomeReward::NAME],
            RewardConfig::Format {} => vec![FormatReward::NAME],
            RewardConfig::IncompletePunishment { .. } => vec![IncompletePunishment::NAME],
            RewardConfig::LengthPenalty { .. } => vec![LengthPenalty::NAME],
            RewardConfig::WeightedSum { terms } => {
                terms.iter().flat_map(|t| t.reward.part_names()).collect()
            }
            RewardConfig::Score { .. } => vec![ScoreReward::NAME],
            RewardConfig::Efficiency { .. } => vec![Efficiency::NAME],
            RewardConfig::ToolFormat { .. } => vec![ToolFormat::NAME],
            RewardConfig::Length { .. } => vec![Length::NAME],
            RewardConfig::Execution { .. } => vec![Execution::NAME],
            RewardConfig::LlmJudge { .. } => vec![LlmJudge::NAME, LlmJudge::FALLBACK_PART],
            RewardConfig::TurnShaping { .. } => vec![TurnShaping::NAME],
            RewardConfig::Gate { reward, .. } => {
                let mut names = reward.part_names();
                names.push(Gate::NAME);
                names
            }
            RewardConfig::Clip { reward, .. }
            | RewardConfig::ScaleOffset { reward, .. }
            | RewardConfig::RunningNorm { reward, .. } => reward.part_names(),
        }
    }

    /// The rewards nested directly inside this one.
    fn children(&self) -> Vec<&RewardConfig> {
        match self {
            RewardConfig::WeightedSum { terms } => terms.iter().map(|t| &t.reward).collect(),
            RewardConfig::Gate {
                condition, reward, ..
            } => vec![condition, reward],
            RewardConfig::Clip { reward, .. }
            | RewardConfig::ScaleOffset { reward, .. }
            | RewardConfig::RunningNorm { reward, .. } => vec![reward],
            _ => Vec::new(),
        }
    }

    fn build_at(&self, path: &str, ctx: &RewardContext) -> Result<Box<dyn RewardFn>> {
        Ok(match self {
            RewardConfig::Outcome { success, failure } => {
                finite(path, "success", *success)?;
                finite(path, "failure", *failure)?;
                Box::new(OutcomeReward {
                    success: *success,
                    failure: *failure,
                })
            }
            RewardConfig::Format {} => Box::new(FormatReward),
            RewardConfig::IncompletePunishment { penalty } => {
                let penalty = *penalty;
                finite(path, "penalty", penalty)?;
                if penalty > 0.0 {
                    return Err(config(format!(
                        "{path}.penalty must be <= 0 (it is added to the reward), got {penalty}"
                    )));
                }
                Box::new(IncompletePunishment { penalty })
            }
            RewardConfig::LengthPenalty {
                max_generated_tokens,
                per_token,
            } => {
                non_negative(path, "per_token", *per_token)?;
                Box::new(LengthPenalty {
                    max_generated_tokens: *max_generated_tokens,
                    per_token: *per_token,
                })
            }
            RewardConfig::WeightedSum { terms } => build_sum(path, terms, ctx)?,
            RewardConfig::Score { missing } => {
                if let Some(m) = missing {
                    finite(path, "missing", *m)?;
                }
                Box::new(ScoreReward { missing: *missing })
            }
            RewardConfig::Efficiency {
                measure,
                best,
                worst,
                only_on_success,
            } => {
                non_negative(path, "best", *best)?;
                finite(path, "worst", *worst)?;
                if worst <= best {
                    return Err(config(format!(
                        "{path}.worst must be greater than {path}.best ({best}), got {worst}"
                    )));
                }
                Box::new(Efficiency {
                    measure: *measure,
                    best: *best,
                    worst: *worst,
                    only_on_success: *only_on_success,
                })
            }
            RewardConfig::ToolFormat { tools } => {
                if let Some(i) = tools.iter().position(|t| t.trim().is_empty()) {
                    return Err(config(format!("{path}.tools[{i}] is a blank tool name")));
                }
                Box::new(ToolFormat::new(tools.iter().map(|t| t.trim())))
            }
            RewardConfig::Length {
                unit,
                budget,
                per_unit,
            } => {
                non_negative(path, "per_unit", *per_unit)?;
                Box::new(Length {
                    unit: *unit,
                    budget: *budget,
                    per_unit: *per_unit,
                })
            }
            RewardConfig::Execution {
                command,
                timeout_ms,
                sandbox,
                files,
            } => {
                let Some((program, args)) = command.split_first() else {
                    return Err(config(format!(
                        "{path}.command must name a program to run, e.g. [\"python3\", \"check.py\"]"
                    )));
                };
                if program.trim().is_empty() {
                    return Err(config(format!("{path}.command[0] is a blank program name")));
                }
                positive_ms(path, "timeout_ms", *timeout_ms)?;
                let timeout = Duration::from_millis(*timeout_ms);
                if *sandbox {
                    if let Some(missing) = files.iter().find(|f| !f.is_file()) {
                        return Err(config(format!(
                            "{path}.files: {} is not a file",
                            missing.display()
                        )));
                    }
                    let mut sandbox = SandboxConfig::default();
                    sandbox.limits.wall_time = timeout;
                    sandbox.limits.cpu_seconds = timeout.as_secs().max(1);
                    Box::new(Execution::new(SandboxCheck::new(
                        command.clone(),
                        files.clone(),
                        sandbox,
                    )))
                } else if !files.is_empty() {
                    return Err(config(format!(
                        "{path}.files only applies with sandbox = true"
                    )));
                } else {
                    Box::new(Execution::new(CommandCheck::new(
                        program.clone(),
                        args.to_vec(),
                        timeout,
                    )))
                }
            }
            RewardConfig::LlmJudge { .. } => build_judge(self, path, ctx)?,
            RewardConfig::TurnShaping { discount } => {
                if !(0.0..=1.0).contains(discount) {
                    return Err(config(format!(
                        "{path}.discount must be in [0, 1], got {discount}"
                    )));
                }
                Box::new(TurnShaping {
                    discount: *discount,
                })
            }
            RewardConfig::Gate {
                condition,
                reward,
                threshold,
                otherwise,
            } => {
                finite(path, "threshold", *threshold)?;
                finite(path, "otherwise", *otherwise)?;
                if reward.part_names().contains(&Gate::NAME) {
                    return Err(config(format!(
                        "{path}.reward already produces the part `gate` (a gate inside a gate); \
                         gate the inner reward on a combined condition instead"
                    )));
                }
                Box::new(Gate {
                    condition: condition.build_at(&format!("{path}.condition"), ctx)?,
                    reward: reward.build_at(&format!("{path}.reward"), ctx)?,
                    threshold: *threshold,
                    otherwise: *otherwise,
                })
            }
            RewardConfig::Clip { reward, min, max } => {
                finite(path, "min", *min)?;
                finite(path, "max", *max)?;
                if min > max {
                    return Err(config(format!(
                        "{path}.min ({min}) must not be greater than {path}.max ({max})"
                    )));
                }
                Box::new(Clip {
                    reward: reward.build_at(&format!("{path}.reward"), ctx)?,
                    min: *min,
                    max: *max,
                })
            }
            RewardConfig::ScaleOffset {
                reward,
                scale,
                offset,
            } => {
                finite(path, "scale", *scale)?;
                finite(path, "offset", *offset)?;
                Box::new(ScaleOffset {
                    reward: reward.build_at(&format!("{path}.reward"), ctx)?,
                    scale: *scale,
                    offset: *offset,
                })
            }
            RewardConfig::RunningNorm { reward, eps } => {
                if !(*eps > 0.0 && eps.is_finite()) {
                    return Err(config(format!(
                        "{path}.eps must be a positive finite number, got {eps}"
                    )));
                }
                Box::new(RunningNorm::from_boxed(
                    reward.build_at(&format!("{path}.reward"), ctx)?,
                    *eps,
                ))
            }
        })
    }
}

/// Checks an `llm_judge` and builds it over the context's backend.
fn build_judge(cfg: &RewardConfig, path: &str, ctx: &RewardContext) -> Result<Box<dyn RewardFn>> {
    let RewardConfig::LlmJudge {
        rubric,
        scale_min,
        scale_max,
        fallback,
        timeout_ms,
        max_concurrency,
        cache_capacity,
        max_transcript_chars,
    } = cfg
    else {
        return Err(config(format!("{path} is not an llm_judge")));
    };
    if rubric.trim().is_empty() {
        return Err(config(format!(
            "{path}.rubric is blank; say what the judge should grade"
        )));
    }
    finite(path, "scale_min", *scale_min)?;
    finite(path, "scale_max", *scale_max)?;
    if scale_max <= scale_min {
        return Err(config(format!(
            "{path}.scale_max must be greater than {path}.scale_min ({scale_min}), got {scale_max}"
        )));
    }
    if !(0.0..=1.0).contains(fallback) {
        return Err(config(format!(
            "{path}.fallback must be in [0, 1] (it stands in for a normalised grade), got {fallback}"
        )));
    }
    positive_ms(path, "timeout_ms", *timeout_ms)?;
    if *max_concurrency == 0 || *max_concurrency > tokio::sync::Semaphore::MAX_PERMITS {
        return Err(config(format!(
            "{path}.max_concurrency must be at least 1, got {max_concurrency}"
        )));
    }
    if *max_transcript_chars == 0 {
        return Err(config(format!(
            "{path}.max_transcript_chars must be at least 1"
        )));
    }
    let Some(backend) = ctx.judge.clone() else {
        return Err(config(format!(
            "{path} is an llm_judge but no judge backend was given: build the reward with \
             RewardConfig::build_with and a RewardContext holding one (with the agentrl CLI, \
             pass --judge-checkpoint to `agentrl reward`)"
        )));
    };
    let settings = JudgeSettings {
        rubric: rubric.clone(),
        scale: ScoreScale {
            min: *scale_min,
            max: *scale_max,
        },
        fallback: *fallback,
        timeout: Duration::from_millis(*timeout_ms),
        max_concurrency: *max_concurrency,
        cache_capacity: *cache_capacity,
        max_transcript_chars: *max_transcript_chars,
    };
    Ok(Box::new(LlmJudge::new(backend, settings)))
}

/// Builds a weighted sum, checking weights and that no two terms produce the same part.
fn build_sum(
    path: &str,
    terms: &[WeightedTermConfig],
    ctx: &RewardContext,
) -> Result<Box<dyn RewardFn>> {
    if terms.is_empty() {
        return Err(config(format!(
            "{path}.terms must contain at least one term"
        )));
    }
    let mut seen = BTreeSet::new();
    let mut built = Vec::with_capacity(terms.len());
    for (i, term) in terms.iter().enumerate() {
        let at = format!("{path}.terms[{i}]");
        finite(&at, "weight", term.weight)?;
        for part in term.reward.part_names() {
            if !seen.insert(part) {
                return Err(config(format!(
                    "{at}.reward produces the part `{part}` which an earlier term already \
                     produces; each reward may appear once per weighted_sum"
                )));
            }
        }
        built.push((
            term.weight,
            term.reward.build_at(&format!("{at}.reward"), ctx)?,
        ));
    }
    Ok(Box::new(WeightedSum::new(built)))
}

/// Fails unless `value` is finite.
fn finite(path: &str, field: &str, value: f64) -> Result<()> {
    if value.is_finite() {
        Ok(())
    } else {
        Err(config(format!(
            "{path}.{field} must be a finite number, got {value}"
        )))
    }
}

/// Fails unless `value` is finite and not negative.
fn non_negative(path: &str, field: &str, value: f64) -> Result<()> {
    finite(path, field, value)?;
    if value < 0.0 {
        return Err(config(format!("{path}.{field} must be >= 0, got {value}")));
    }
    Ok(())
}

/// Fails when a duration in milliseconds is zero.
fn positive_ms(path: &str, field: &str, value: u64) -> Result<()> {
    if value == 0 {
        return Err(config(format!(
            "{path}.{field} must be at least 1 (milliseconds)"
        )));
    }
    Ok(())
}

fn config(message: String) -> Error {
    Error::Config(message)
}
