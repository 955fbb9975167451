//! Multi-task and remote-only env factories: `EnvMix` draws tasks by weight and plays each in its
//! own env; `RemoteEnvFactory::served` trains on an env only the server knows, by task index.

use agentrl_core::{Env, Split};
use agentrl_env::{EnvFactory, EnvMix, lookup, run_solver_episode};

#[cfg(feature = "protocol")]
use crate::common;

fn mix() -> EnvMix {
    EnvMix::new(vec![
        (lookup("arith-calc").unwrap(), 3.0),
        (lookup("maze").unwrap(), 1.0),
    ])
    .unwrap()
}

#[test]
fn tasks_follow_the_weights_and_are_their_envs_own() {
    let mix = mix();
    let n = 600;
    let mut arith = 0;
    for index in 0..n {
        let task = mix.task(Split::Test, index);
        assert_eq!(task, mix.task(Split::Test, index), "deterministic");
        let own = lookup(&task.env_id).unwrap().task(Split::Test, index);
        assert_eq!(task, own, "task {index} is its env's task {index}");
        arith += usize::from(task.env_id == "arith-calc");
    }
    let share = arith as f64 / n as f64;
    assert!((0.68..=0.82).contains(&share), "arith-calc share {share}");
    assert_eq!(mix.id(), "mix(arith-calc+maze)");
    assert_eq!(mix.max_turns(), lookup("maze").unwrap().max_turns());
}

#[tokio::test]
async fn the_mixture_plays_each_task_in_its_own_env() {
    let mix = mix();
    let mut solver = mix.solver(0);
    let mut seen = std::collections::BTreeSet::new();
    for index in 0..24 {
        let task = mix.task(Split::Test, index);
        let episode = run_solver_episode(&mix, solver.as_mut(), &task)
            .await
            .unwrap();
        assert!(
            episode.success,
            "task {} of {} failed",
            task.id, task.env_id
        );
        seen.insert(task.env_id);
    }
    assert_eq!(seen.len(), 2, "both envs were played: {seen:?}");
}

#[tokio::test]
async fn a_task_of_another_env_is_a_clear_error() {
    let mix = mix();
    let stray = lookup("math-reasoning").unwrap().task(Split::Test, 0);
    let err = mix.make().reset(&stray).await.unwrap_err().to_string();
    assert!(
        err.contains("math-reasoning") && err.contains("arith-calc, maze"),
        "{err}"
    );
}

#[test]
fn bad_mixtures_are_refused() {
    let arith = || lookup("arith-calc").unwrap();
    let err = |parts| EnvMix::new(parts).unwrap_err().to_string();
    assert!(err(vec![]).contains("at least one env"));
    assert!(err(vec![(arith(), 0.0)]).contains("weight 0"));
    assert!(err(vec![(arith(), f64::NAN)]).contains("finite"));
    assert!(err(vec![(arith(), 1.0), (arith(), 2.0)]).contains("twice"));
}

/// Remote factories: these need the `protocol` feature.
#[cfg(feature = "protocol")]
mod served {
    use agentrl_core::{Env, Split};
    use agentrl_env::protocol::{RemoteEnvFactory, ServerConfig, serve};
    use agentrl_env::{EnvFactory, lookup, run_solver_episode};

    use super::common::{client, loopback};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_served_env_trains_by_the_servers_task_index() {
        let (addr, handle) = serve(
            loopback(),
            vec![lookup("arith-calc").unwrap()],
            ServerConfig::default(),
        )
        .await
        .unwrap();
        let served = RemoteEnvFactory::served(client(addr), "arith-calc", 4);
        served.check_served().await.unwrap();
        assert!(!served.has_solver());
        assert_eq!(served.max_turns(), 4);
        // The server's task 5 is the one the registered env generates for index 5, so the local
        // expert can play it: that proves the session started on the server's own task 5.
        let local = lookup("arith-calc").unwrap();
        for index in [0, 5, 17] {
            let task = served.task(Split::Test, index);
            assert_eq!(task.data["index"], index);
            let mut expert = local.solver(0);
            let episode =
                run_solver_episode(&served, expert.as_mut(), &local.task(Split::Test, index)).await;
            // run_solver_episode resets with the local task (no data.index): a clear error ...
            let err = episode.unwrap_err().to_string();
            assert!(err.contains("data.index"), "{err}");
            // ... while the served task starts the server's task.
            let mut env = served.make();
            let obs = env.reset(&task).await.unwrap();
            let expected = local
                .make()
                .reset(&local.task(Split::Test, index))
                .await
                .unwrap();
            assert_eq!(obs, expected);
        }
        let missing = RemoteEnvFactory::served(client(addr), "python-guess", 4);
        let err = missing.check_served().await.unwrap_err().to_string();
        assert!(
            err.contains("python-guess") && err.contains("arith-calc"),
            "{err}"
        );
        handle.shutdown().await.unwrap();
    }

    #[test]
    fn a_remote_factory_demonstrates_with_its_local_envs_demonstrator() {
        let knobs = serde_json::json!({"copy_error_prob": 0.5});
        let knobs = knobs.as_object().unwrap();
        let remote = RemoteEnvFactory::new(client(loopback()), lookup("arith-calc").unwrap());
        assert_eq!(remote.demonstrator_knobs().len(), 3);
        assert!(remote.demonstrator(knobs, 0).is_ok());
        let served = RemoteEnvFactory::served(client(loopback()), "python-guess", 4);
        assert!(served.demonstrator_knobs().is_empty());
        let err = served.demonstrator(knobs, 0).err().unwrap().to_string();
        assert!(
            err.contains("python-guess") && err.contains("copy_error_prob"),
            "{err}"
        );
    }
}
