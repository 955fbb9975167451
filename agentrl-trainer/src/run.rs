//! The run commands behind the `agentrl` binary: SFT warm start, RL, evaluation, the demo.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use agentrl_core::{
    Error, Policy, Result, RewardFn, SeededRng, Trajectory, read_jsonl, write_jsonl,
};
use agentrl_env::EnvFactory;
use agentrl_policy::{ChatFormat, EngineOptions, RouterPolicy, TchPolicy, TinyChatFormat};
use tch::Device;

use crate::config::{CROSS_WITH_SERVERS, PretrainedModel, RunConfig};
use crate::cross_policy::{CrossSync, cross_rollout_policy};
use crate::demos::{TooLong, collect_demonstrations};
use crate::eval::{EvalReport, evaluate};
use crate::learner::Learner;
use crate::metrics::{MetricsWriter, read_metrics};
use crate::pipeline::{RlRun, RlSummary, train_rl};
use crate::resume::{OPTIMIZER_FILE, ResumePoint, newest_checkpoint, rewind_run_files};

/// The weights RL started from, kept (in `checkpoints/`) as the KL reference of resumed runs.
const RL_START_FILE: &str = "rl-start.safetensors";
use crate::rollout::RolloutContext;
use crate::weight_sync::{Engines, ServerPush, WeightSync};
use agentrl_policy::checkpoint::{LatestCheckpoint, checkpoint_dir, write_latest};
pub use agentrl_policy::device::{config_device, default_device};
#[cfg(feature = "full")]
use agentrl_policy::load::load_chat_format;
use agentrl_policy::load::{load_llama, model_name};

/// A configured run: its config, env, chat format, device and directory.
pub struct Run {
    /// The configuration.
    pub config: RunConfig,
    /// The env factory.
    pub factory: Arc<dyn EnvFactory>,
    /// The chat format of the model.
    pub format: Arc<dyn ChatFormat>,
    /// Where tensors live.
    pub device: Device,
    /// The run directory.
    pub dir: PathBuf,
}

/// The chat format (tokenizer and template) of a pretrained model, with the config's template
/// override.
#[cfg(feature = "full")]
fn pretrained_format(pretrained: &PretrainedModel) -> Result<Arc<dyn ChatFormat>> {
    let template = match &pretrained.chat_template {
        Some(t) => Some(std::fs::read_to_string(t).map_err(|e| Error::io("reading", t, e))?),
        None => None,
    };
    Ok(Arc::new(load_chat_format(
        &pretrained.path,
        template.as_deref(),
    )?))
}

/// Without the `full` feature there are no Hugging Face tokenizers or chat templates.
#[cfg(not(feature = "full"))]
fn pretrained_format(pretrained: &PretrainedModel) -> Result<Arc<dyn ChatFormat>> {
    Err(Error::Config(format!(
        "[model] pretrained = {}: this agentrl was built without the `full` feature, which \
         pretrained models need for their tokenizer and chat template; build the full binary \
         with `cargo build --release -p agentrl-trainer --bin agentrl`",
        pretrained.path.display()
    )))
}

impl Run {
    /// Prepares a run directory (creating it and copying the config into it).
    pub fn new(config: RunConfig, dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("creating", dir, e))?;
        let text = toml::to_string_pretty(&config)
            .map_err(|e| Error::Config(format!("serialising the config: {e}")))?;
        let copy = dir.join("config.toml");
        std::fs::write(&copy, text).map_err(|e| Error::io("writing", &copy, e))?;
        agentrl_policy::set_torch_threads(config.torch_threads);
        tch::manual_seed(config.seed as i64);
        let format: Arc<dyn ChatFormat> = match config.model.pretrained() {
            None => Arc::new(TinyChatFormat::new()),
            Some(pretrained) => pretrained_format(pretrained)?,
        };
        Ok(Run {
            factory: crate::envs::env_factory(&config.env)?,
            format,
            device: config_device(config.device.as_deref())?,
            dir: dir.to_path_buf(),
            config,
        })
    }

    /// A learner with freshly initialised weights (tiny GPT) or the pretrained model's (with
    /// fresh LoRA adapters when `[lora]` is set), then loaded from `init` when given (a
    /// checkpoint of the same kind: all weights, or the adapters).
    ///
    /// The work runs on a thread of its own that ends with it: libgomp keeps an OpenMP team
    /// for every thread that ran a parallel libtorch operation, and a team left idle on the
    /// calling thread would slow the teams that work later (see
    /// `TchPolicy::run_on_model_thread`).
    pub fn learner(&self, lr: f64, init: Option<&Path>) -> Result<Learner> {
        let threads = self.config.torch_threads;
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("agentrl-load".into())
                .spawn_scoped(scope, || {
                    agentrl_policy::set_torch_threads(threads);
                    self.learner_here(lr, init)
                })
                .map_err(|e| Error::Trainer(format!("could not start the loading thread: {e}")))?
                .join()
                .map_err(|_| Error::Trainer("the loading thread panicked".into()))?
        })
    }

    /// [`Self::learner`] on the calling thread.
    fn learner_here(&self, lr: f64, init: Option<&Path>) -> Result<Learner> {
        let mut learner = match self.config.model.pretrained() {
            None => {
                let gpt = self.config.model.gpt(self.format.vocab_size())?;
                Learner::new(gpt, lr, self.device)?
            }
            Some(pretrained) => {
                let (vs, model) = load_llama(&pretrained.path, self.device, pretrained.dtype)?;
                Learner::llama(vs, model, self.config.lora.as_ref(), lr)?
            }
        };
        learner.set_micro_batch(self.config.model.micro_batch);
        learner.set_micro_batch_tokens(self.config.model.micro_batch_tokens);
        learner.set_shared_prefix(self.config.model.shared_prefix_tokens);
        learner.set_data_parallel(self.config.model.data_parallel);
        if let Some(path) = init {
            learner.load(path)?;
        }
        Ok(learner)
    }

    /// A rollout policy serving a copy of the learner's weights.
    pub fn rollout_policy(
        &self,
        learner: &Learner,
        share_trained: bool,
    ) -> Result<(TchPolicy, RolloutContext)> {
        let threads = self.config.pipeline.policy_threads;
        self.rollout_policy_with(learner, share_trained, threads)
    }

    /// [`Self::rollout_policy`] with `threads` libtorch threads for the model thread.
    fn rollout_policy_with(
        &self,
        learner: &Learner,
        share_trained: bool,
        threads: Option<i32>,
    ) -> Result<(TchPolicy, RolloutContext)> {
        let seed = self.config.seed ^ 0x5A5A;
        let policy = self.spawn_policy(learner, seed, share_trained, threads)?;
        let ctx = RolloutContext {
            factory: self.factory.clone(),
            policy: Arc::new(policy.clone()),
            format: self.format.clone(),
            max_seq_len: self.config.model.max_seq_len,
            stop: self.config.model.stop.clone(),
        };
        Ok((policy, ctx))
    }

    /// A model thread serving the learner's weights, with the `[pipeline]` engine settings and
    /// `threads` libtorch threads (`None`: the process's); `seed` seeds its sampling. Frozen
    /// tensors are shared with the learner, trained ones too when `share_trained` is set (see
    /// [`Learner::shared_model`]), the others copied.
    fn spawn_policy(
        &self,
        learner: &Learner,
        seed: u64,
        share_trained: bool,
        threads: Option<i32>,
    ) -> Result<TchPolicy> {
        // Building the rollout model draws initial weights it then replaces: on one libtorch
        // thread, so that this thread starts no OpenMP team for it (see `Self::learner`).
        let (vs, model) =
            agentrl_policy::with_torch_threads(1, || learner.shared_model(share_trained))?;
        let format = self.format.clone();
        let pipeline = &self.config.pipeline;
        // Deterministic: one row at a time, every prompt prefilled whole (see
        // `PipelineConfig::deterministic`).
        let (max_batch, cache_mib) = match pipeline.deterministic {
            true => (1, 0),
            false => (pipeline.max_batch, pipeline.kv_cache_mib),
        };
        let options = EngineOptions {
            session_cache_bytes: cache_mib.saturating_mul(1 << 20),
            prompt_cache_bytes: cache_mib.saturating_mul(1 << 18),
            threads,
            ..EngineOptions::with_max_batch(max_batch)
        };
        TchPolicy::spawn_with_options(
            vs,
            model,
            options,
            seed,
            Some(Arc::new(move |ids| format.decode(ids))),
        )
    }

    /// Where RL rollouts run: the in-process policy (mixed per turn with its stale snapshot and
    /// any extra policies under `[rl.cross_policy]`), or the `[pipeline] rollout_servers`
    /// behind a router (sticky sessions, least outstanding requests), with how weights reach
    /// them.
    fn rl_rollouts(&self, learner: &Learner) -> Result<(WeightSync, RolloutContext)> {
        let pipeline = &self.config.pipeline;
        if let Some(cross) = &self.config.rl.cross_policy {
            if pipeline.has_rollout_servers() {
                return Err(Error::Config(CROSS_WITH_SERVERS.into()));
            }
            cross.validate().map_err(Error::Config)?;
            // Two model threads generate at once: by default they share `torch_threads`.
            let threads = Some(cross_policy_threads(
                pipeline.policy_threads,
                self.config.torch_threads,
            ));
            let (current, mut ctx) = self.rollout_policy_with(learner, false, threads)?;
            let snapshot_seed = self.config.seed ^ 0x5A5A ^ 0x57A1E;
            let snapshot = self.spawn_policy(learner, snapshot_seed, false, threads)?;
            let policy =
                cross_rollout_policy(&current, &snapshot, cross, self.config.seed ^ 0xC805)?;
            ctx.policy = Arc::new(policy);
            let sync = CrossSync::new(current, snapshot, cross.stale_every);
            return Ok((WeightSync::Cross(sync), ctx));
        }
        if !pipeline.has_rollout_servers() {
            // Synchronous: the policy never generates while the learner updates, so it can
            // read the learner's tensors, and publishing is only the version.
            let synchronous = pipeline.max_staleness == 0;
            let engines = pipeline.engines.max(1);
            // Several model threads generate at once: by default they share `torch_threads`.
            let threads = match engines {
                1 => pipeline.policy_threads,
                n => Some(pipeline.policy_threads.unwrap_or_else(|| {
                    (self.config.torch_threads / i32::try_from(n).unwrap_or(i32::MAX)).max(1)
                })),
            };
            let (policy, mut ctx) = self.rollout_policy_with(learner, synchronous, threads)?;
            let more = (1..engines)
                .map(|k| {
                    let seed = self.config.seed ^ 0x5A5A ^ (0xE9 * k as u64);
                    self.spawn_policy(learner, seed, synchronous, threads)
                })
                .collect::<Result<Vec<_>>>()?;
            let several = !more.is_empty();
            let engines = Engines::new(policy, more);
            if several {
                let backends = engines
                    .all()
                    .map(|engine| Arc::new(engine.clone()) as Arc<dyn Policy>)
                    .collect();
                ctx.policy = Arc::new(RouterPolicy::new(backends)?);
            }
            let sync = match synchronous {
                true => WeightSync::Shared(engines),
                false => WeightSync::Local(engines),
            };
            return Ok((sync, ctx));
        }
        let base_model = self
            .config
            .model
            .pretrained()
            .map_or_else(|| "agentrl-tiny-gpt".to_string(), |p| model_name(&p.path));
        let (push, router) = ServerPush::new(
            &pipeline.fleet(),
            pipeline.rollout_api_key.as_deref(),
            learner.spec(),
            &self.dir.join("rollout-weights"),
            &base_model,
        )?;
        let ctx = RolloutContext {
            factory: self.factory.clone(),
            policy: router,
            format: self.format.clone(),
            max_seq_len: self.config.model.max_seq_len,
            stop: self.config.model.stop.clone(),
        };
        Ok((WeightSync::Servers(push), ctx))
    }

    /// The TensorBoard folder, when `[logging] tensorboard` is on.
    fn tensorboard_dir(&self) -> Option<PathBuf> {
        self.config.logging.tensorboard.then(|| self.dir.join("tb"))
    }

    /// `metrics.jsonl`'s writer; with `[logging] tensorboard` it also writes to `tb/`.
    fn metrics(&self) -> Result<MetricsWriter> {
        MetricsWriter::open_with_tensorboard(
            &self.dir.join("metrics.jsonl"),
            self.tensorboard_dir().as_deref(),
        )
    }

    /// Writes the demonstrations file `demos.jsonl` (played by the env's demonstrator with the
    /// `[sft.demonstrator]` knobs: its reference solver when there are none) and returns its
    /// path.
    pub async fn write_demonstrations(&self) -> Result<PathBuf> {
        if !self.factory.has_solver() {
            return Err(Error::Config(format!(
                "env `{}` has no reference solver here (it is known only to its server), so \
                 there are no demonstrations to clone; start RL from a checkpoint with \
                 `agentrl train --init FILE`",
                self.factory.id()
            )));
        }
        crate::envs::check_envs(&self.config.env, self.factory.as_ref()).await?;
        let cfg = self.config.sft()?;
        let mut solver = self
            .factory
            .demonstrator(&cfg.demonstrator, self.config.seed)?;
        let demos = collect_demonstrations(
            self.factory.as_ref(),
            solver.as_mut(),
            self.format.as_ref(),
            1_000_000_000,
            cfg.demos,
        )
        .await?;
        let path = self.dir.join("demos.jsonl");
        write_jsonl(&path, &demos, false)?;
        let ok = demos.iter().filter(|t| t.success).count();
        tracing::info!(
            "wrote {} demonstrations ({} correct) to {}",
            demos.len(),
            ok,
            path.display()
        );
        Ok(path)
    }

    /// Behaviour cloning on the trajectories of `demos` (a JSONL file); returns the learner and
    /// saves `checkpoints/sft.safetensors`.
    pub fn sft(&self, demos: &Path) -> Result<Learner> {
        let (trajectories, bad) = read_jsonl(demos)?;
        for b in &bad {
            tracing::warn!("skipping unreadable demonstration: {}", b.message);
        }
        let max_seq = self.config.model.max_seq_len;
        let usable: Vec<&Trajectory> = trajectories
            .iter()
            .filter(|t| t.num_tokens() <= max_seq && t.num_generated() > 0)
            .collect();
        let too_long = TooLong::of(&trajectories, max_seq);
        if !too_long.is_empty() {
            tracing::warn!("{}", too_long.message(max_seq));
        }
        if usable.is_empty() {
            return Err(Error::Trainer(format!(
                "{} has no usable demonstrations (each must fit in {max_seq} tokens)",
                demos.display()
            )));
        }
        let cfg = self.config.sft()?;
        let mut learner = self.learner(cfg.lr, None)?;
        let mut metrics = self.metrics()?;
        let mut rng = SeededRng::from_parts(&[self.config.seed, 0x5F7]);
        let too_long_per_env: serde_json::Map<String, serde_json::Value> = too_long
            .per_env
            .iter()
            .map(|(env, (n, longest))| {
                let counts = serde_json::json!({"demonstrations": n, "longest_tokens": longest});
                (env.clone(), counts)
            })
            .collect();
        metrics.write(&serde_json::json!({
            "kind": "sft_data", "demonstrations": trajectories.len(), "usable": usable.len(),
            "unreadable": bad.len(), "too_long": too_long_per_env,
            "too_long_successful": too_long.successful,
        }))?;
        let progress = crate::progress::phase("SFT", cfg.steps as u64);
        let t0 = Instant::now();
        let mut non_finite_skipped = 0usize;
        for step in 0..cfg.steps {
            let lr = cfg.lr_at(step);
            learner.set_lr(lr);
            let batch: Vec<&Trajectory> = (0..cfg.batch_size)
                .map(|_| usable[(rng.next_u64() % usable.len() as u64) as usize])
                .collect();
            let stats = learner.sft_step_aggregated(&batch, 1.0, cfg.loss_agg);
            non_finite_skipped += usize::from(stats.skipped_non_finite);
            progress.inc(1);
            if (step + 1) % 25 == 0 || step + 1 == cfg.steps {
                metrics.write(&serde_json::json!({
                    "kind": "sft_step", "step": step + 1, "loss": stats.loss, "lr": lr,
                    "entropy": stats.entropy, "grad_norm": stats.grad_norm,
                    "non_finite_skipped": non_finite_skipped,
                    "seconds": t0.elapsed().as_secs_f64(),
                }))?;
                progress.set_message(format!("loss {:.4}", stats.loss));
            }
            if (step + 1) % 100 == 0 || step + 1 == cfg.steps {
                tracing::info!(
                    "sft step {}/{}: loss {:.4}",
                    step + 1,
                    cfg.steps,
                    stats.loss
                );
            }
        }
        progress.finish();
        learner.save(&checkpoint_dir(&self.dir).join("sft.safetensors"))?;
        Ok(learner)
    }

    /// Greedy evaluation of the learner's weights on `config.eval.tasks` test tasks.
    pub async fn evaluate(
        &self,
        learner: &Learner,
        label: &str,
        step: usize,
    ) -> Result<EvalReport> {
        crate::envs::check_envs(&self.config.env, self.factory.as_ref()).await?;
        // The learner is idle while it evaluates: the policy reads its tensors. Its turns are
        // labelled with the learner's step as the policy version.
        let (policy, ctx) = self.rollout_policy(learner, true)?;
        policy.set_weights(Vec::new(), step as u64).await?;
        let tasks = crate::envs::eval_tasks(&self.config.env, self.config.eval.tasks)?;
        let samples = self.config.eval.samples.max(1);
        let tasks = tasks
            .into_iter()
            .zip(0..)
            .flat_map(|pair| std::iter::repeat_n(pair, samples))
            .collect();
        let reward = self.evaluation_reward()?;
        let (report, trajectories) =
            evaluate(&ctx, tasks, &self.config.eval.sampling, reward.as_deref()).await?;
        crate::eval::save_evaluation(
            &self.dir,
            label,
            step,
            &report,
            &trajectories,
            &mut self.metrics()?,
        )?;
        tracing::info!(
            "eval [{label}]: success {:.3} on {} held-out tasks (tool use {:.3})",
            report.success_rate,
            report.tasks,
            report.tool_use_rate
        );
        if report.per_task.len() > 1 {
            for line in report.per_task_lines() {
                tracing::info!("eval [{label}] {line}");
            }
        }
        Ok(report)
    }

    /// The reward evaluations are scored with, so the saved episodes and the report carry
    /// the reward RL would have given them: a fresh instance of the run's reward, when it
    /// needs no judge model and keeps no state (a fresh normaliser would score on other
    /// statistics than the run's); otherwise none.
    fn evaluation_reward(&self) -> Result<Option<Box<dyn RewardFn>>> {
        if self.config.reward.needs_judge() {
            return Ok(None);
        }
        let reward = self.config.reward.build()?;
        Ok(reward.state().is_none().then_some(reward))
    }

    /// GRPO with the async pipeline, starting from `learner` at step `start_step` (the optimiser
    /// as `learner` has it; see [`Run::rl_resumed`] to continue a checkpoint exactly).
    pub async fn rl(&self, learner: Learner, start_step: usize) -> Result<(Learner, RlSummary)> {
        self.rl_from(learner, start_step, None).await
    }

    /// RL continued from a checkpoint ([`Run::resume_point`]) with `learner` from
    /// [`Run::resumed_learner`]: `metrics.jsonl`, the samples and the TensorBoard file are cut
    /// back to the checkpoint, the reward's state is restored, and the producer's task stream
    /// and sampling seeds continue where the checkpoint left them.
    pub async fn rl_resumed(
        &self,
        learner: Learner,
        point: ResumePoint,
    ) -> Result<(Learner, RlSummary)> {
        rewind_run_files(&self.dir, &point.state, self.tensorboard_dir().as_deref())?;
        // `latest.json` may name a newer checkpoint that did not check out.
        if point.dir.is_some() {
            let file = point
                .model
                .strip_prefix(checkpoint_dir(&self.dir))
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            if !file.is_empty() {
                write_latest(
                    &self.dir,
                    &LatestCheckpoint {
                        step: point.state.step,
                        version: point.state.version,
                        file,
                    },
                )?;
            }
        }
        self.rl_from(learner, point.state.step, Some(point)).await
    }

    /// The body of [`Run::rl`] and [`Run::rl_resumed`].
    async fn rl_from(
        &self,
        learner: Learner,
        start_step: usize,
        resume: Option<ResumePoint>,
    ) -> Result<(Learner, RlSummary)> {
        crate::envs::check_envs(&self.config.env, self.factory.as_ref()).await?;
        let (reward, _judge) =
            crate::rescore::build_reward(&self.config, self.config.judge_checkpoint.as_deref())?;
        // A checkpoint directory always says what the reward's state was (null: none), so a
        // stateful reward resumed from one without state is an error, not a silent restart.
        if let Some(point) = resume.as_ref().filter(|p| p.dir.is_some()) {
            let none = serde_json::Value::Null;
            reward.restore_state(point.state.reward_state.as_ref().unwrap_or(&none))?;
        }
        let (weights, ctx) = self.rl_rollouts(&learner)?;
        let mut learner = learner;
        if self.config.rl.kl_coef > 0.0 {
            // The KL reference is the policy RL started from, kept for resumed runs.
            let start_weights = checkpoint_dir(&self.dir).join(RL_START_FILE);
            if start_step > 0 && start_weights.is_file() {
                learner.freeze_reference_from(&start_weights)?;
            } else {
                learner.freeze_reference()?;
                if start_step == 0 {
                    learner.save(&start_weights)?;
                }
            }
        }
        let run = RlRun {
            config: self.config.clone(),
            ctx,
            weights,
            reward,
            run_dir: self.dir.clone(),
            start_step,
            resume,
        };
        let (learner, _metrics, summary) = train_rl(run, learner, self.metrics()?).await?;
        if let (Some(pretrained), Some(_)) = (self.config.model.pretrained(), learner.spec().lora())
        {
            let dir = checkpoint_dir(&self.dir).join("adapter");
            learner.save_peft(&dir, &model_name(&pretrained.path))?;
            tracing::info!("wrote the LoRA adapter (PEFT layout) to {}", dir.display());
        }
        Ok((learner, summary))
    }

    /// The latest complete RL checkpoint of this run, if any: `(step, weights file)`.
    pub fn latest_checkpoint(&self) -> Result<Option<(usize, PathBuf)>> {
        Ok(self.resume_point()?.map(|p| (p.state.step, p.model)))
    }

    /// The newest complete checkpoint of this run to resume from, if any (see
    /// [`newest_checkpoint`]: half-written or corrupt ones are skipped with a warning).
    pub fn resume_point(&self) -> Result<Option<ResumePoint>> {
        newest_checkpoint(&self.dir, self.config.rl.tasks_per_step)
    }

    /// A learner holding a checkpoint's weights and, when it has it, its optimiser state.
    pub fn resumed_learner(&self, point: &ResumePoint) -> Result<Learner> {
        let mut learner = self.learner(self.config.rl.lr, Some(&point.model))?;
        if let Some(optimizer) = point.file(OPTIMIZER_FILE) {
            learner.load_optimizer(&optimizer)?;
        }
        Ok(learner)
    }

    /// Draws `learning_curve.png` from `metrics.jsonl`.
    pub fn plot(&self) -> Result<PathBuf> {
        let records = read_metrics(&self.dir.join("metrics.jsonl"))?;
        let out = self.dir.join("learning_curve.png");
        crate::plot::plot_learning_curve(&records, &out)?;
        Ok(out)
    }
}

/// What `agentrl demo` reports in `summary.json`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DemoSummary {
    /// Greedy held-out success after SFT.
    pub eval_success_before_rl: f64,
    /// Greedy held-out success after RL.
    pub eval_success_after_rl: f64,
    /// Held-out tasks per evaluation.
    pub eval_tasks: usize,
    /// RL steps run.
    pub rl_steps: usize,
    /// Wall seconds of the whole demo.
    pub wall_seconds: f64,
    /// Wall seconds of each phase.
    pub phase_seconds: serde_json::Value,
    /// Per env: held-out success after SFT and after RL (one entry per env of a mixture).
    pub per_task: std::collections::BTreeMap<String, TaskChange>,
    /// Held-out reports in full.
    pub eval_before: EvalReport,
    /// Held-out report after RL.
    pub eval_after: EvalReport,
    /// RL totals.
    pub rl: RlSummary,
}

/// One env's held-out success before and after RL.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct TaskChange {
    /// Greedy held-out success after SFT.
    pub before_rl: f64,
    /// Greedy held-out success after RL.
    pub after_rl: f64,
    /// `after_rl - before_rl`.
    pub change: f64,
}

/// Each env's change from `before` to `after` (envs of either report).
fn task_changes(
    before: &EvalReport,
    after: &EvalReport,
) -> std::collections::BTreeMap<String, TaskChange> {
    let success = |r: &EvalReport, env: &str| r.per_task.get(env).map_or(0.0, |s| s.success_rate);
    before
        .per_task
        .keys()
        .chain(after.per_task.keys())
        .map(|env| {
            let (b, a) = (success(before, env), success(after, env));
            let change = TaskChange {
                before_rl: b,
                after_rl: a,
                change: a - b,
            };
            (env.clone(), change)
        })
        .collect()
}

/// SFT on imperfect demonstrations, evaluation, GRPO, evaluation; writes `summary.json` and
/// `learning_curve.png` into the run directory.
pub async fn demo(config: RunConfig, dir: &Path) -> Result<DemoSummary> {
    demo_from(config, dir, None).await
}

/// [`demo`], or with `sft` (weights an earlier run's SFT saved) the demo without its
/// demonstrations and SFT: the weights are copied to `checkpoints/sft.safetensors` and the
/// run goes on from there. The ablation's variants share one SFT per seed this way.
pub async fn demo_from(config: RunConfig, dir: &Path, sft: Option<&Path>) -> Result<DemoSummary> {
    if dir.join("metrics.jsonl").exists() {
        return Err(Error::Config(format!(
            "{} already holds a run; remove it or pick another --run-dir",
            dir.display()
        )));
    }
    let t0 = Instant::now();
    let run = Run::new(config, dir)?;
    let (learner, t_demos) = match sft {
        None => {
            let demos = run.write_demonstrations().await?;
            let t_demos = t0.elapsed().as_secs_f64();
            (run.sft(&demos)?, t_demos)
        }
        Some(weights) => {
            let checkpoints = checkpoint_dir(&run.dir);
            std::fs::create_dir_all(&checkpoints)
                .map_err(|e| Error::io("creating", &checkpoints, e))?;
            let copy = checkpoints.join("sft.safetensors");
            std::fs::copy(weights, &copy).map_err(|e| Error::io("copying", weights, e))?;
            (run.learner(run.config.rl.lr, Some(&copy))?, 0.0)
        }
    };
    let t_sft = t0.elapsed().as_secs_f64();
    let before = run.evaluate(&learner, "after_sft", 0).await?;
    let t_eval1 = t0.elapsed().as_secs_f64();
    let (learner, rl) = run.rl(learner, 0).await?;
    let t_rl = t0.elapsed().as_secs_f64();
    let after = run.evaluate(&learner, "after_rl", rl.steps).await?;
    let t_eval2 = t0.elapsed().as_secs_f64();
    run.plot()?;
    let summary = DemoSummary {
        eval_success_before_rl: before.success_rate,
        eval_success_after_rl: after.success_rate,
        eval_tasks: after.tasks,
        rl_steps: rl.steps,
        wall_seconds: t0.elapsed().as_secs_f64(),
        phase_seconds: serde_json::json!({
            "demonstrations": t_demos, "sft": t_sft - t_demos, "eval_before": t_eval1 - t_sft,
            "rl": t_rl - t_eval1, "eval_after": t_eval2 - t_rl,
        }),
        per_task: task_changes(&before, &after),
        eval_before: before,
        eval_after: after,
        rl,
    };
    let path = dir.join("summary.json");
    let text = serde_json::to_string_pretty(&summary).map_err(|e| Error::json("summary", e))?;
    std::fs::write(&path, text).map_err(|e| Error::io("writing", &path, e))?;
    Ok(summary)
}

/// libtorch threads of each of cross-policy sampling's two model threads: `configured`
/// (`[pipeline] policy_threads`) when set, else half of `torch_threads` (at least 1), so the
/// two do not oversubscribe the cores the learner uses in turn.
fn cross_policy_threads(configured: Option<i32>, torch_threads: i32) -> i32 {
    configured.unwrap_or((torch_threads / 2).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cross_policy_model_threads_share_the_torch_threads_unless_configured() {
        assert_eq!(cross_policy_threads(None, 2), 1);
        assert_eq!(cross_policy_threads(None, 8), 4);
        assert_eq!(cross_policy_threads(None, 1), 1);
        assert_eq!(cross_policy_threads(Some(3), 2), 3);
    }
}
