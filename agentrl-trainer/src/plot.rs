//! The learning-curve PNG of a run, drawn from its `metrics.jsonl`.

use std::path::Path;

use agentrl_core::{Error, Result};
use plotters::prelude::*;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

fn register_font() -> Result<()> {
    static ONCE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *ONCE.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(Error::Trainer(
            "the bundled plot font could not be loaded".into(),
        ))
    }
}

/// Draws reward and success rate of training steps (`kind = "rl_step"`) and the evaluation
/// points (`kind = "eval"`) against the RL step, into a PNG at `out`.
pub fn plot_learning_curve(records: &[serde_json::Value], out: &Path) -> Result<()> {
    register_font()?;
    let series = |kind: &str, key: &str| -> Vec<(f64, f64)> {
        records
            .iter()
            .filter(|r| r["kind"] == kind)
            .filter_map(|r| Some((r["step"].as_f64()?, r[key].as_f64()?)))
            .collect()
    };
    let reward = series("rl_step", "reward_mean");
    let success = series("rl_step", "success_rate");
    let eval = series("eval", "success_rate");
    let top = reward
        .iter()
        .chain(success.iter())
        .map(|p| p.1)
        .fold(1.0, f64::max)
        + 0.05;
    let max_step = reward
        .iter()
        .chain(eval.iter())
        .map(|p| p.0)
        .fold(1.0, f64::max);
    let err = |e: String| Error::Trainer(format!("drawing {}: {e}", out.display()));
    let root = BitMapBackend::new(out, (900, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption("AgentRL learning curve", ("sans-serif", 24))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..max_step, 0f64..top)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("RL step")
        .y_desc("rate / reward")
        .draw()
        .map_err(|e| err(e.to_string()))?;
    let lines = [
        (reward, BLUE, "train reward (mean)"),
        (success, GREEN, "train success rate"),
    ];
    for (points, color, label) in lines {
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(|e| err(e.to_string()))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
    }
    // A multi-task run: one train success curve per env, and its held-out points beside it.
    let tasks = task_ids(records);
    if tasks.len() > 1 {
        for (k, env) in tasks.iter().enumerate() {
            let color = Palette99::pick(k + 3).to_rgba();
            let train = per_task_series(records, "rl_step", env);
            chart
                .draw_series(LineSeries::new(train, color.stroke_width(1)))
                .map_err(|e| err(e.to_string()))?
                .label(format!("{env} train success"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
            let held_out = per_task_series(records, "eval", env);
            chart
                .draw_series(
                    held_out
                        .into_iter()
                        .map(move |(x, y)| TriangleMarker::new((x, y), 6, color.filled())),
                )
                .map_err(|e| err(e.to_string()))?;
        }
    }
    chart
        .draw_series(
            eval.iter()
                .map(|&(x, y)| Circle::new((x, y), 6, RED.filled())),
        )
        .map_err(|e| err(e.to_string()))?
        .label("held-out greedy success")
        .legend(|(x, y)| Circle::new((x + 9, y), 5, RED.filled()));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))
}

/// The env ids of the `per_task` objects in `records`, sorted.
fn task_ids(records: &[serde_json::Value]) -> Vec<String> {
    let mut ids: Vec<String> = records
        .iter()
        .filter_map(|r| r["per_task"].as_object())
        .flat_map(|tasks| tasks.keys().cloned())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// `(step, success_rate)` of env `env` in the `per_task` objects of the records of `kind`.
fn per_task_series(records: &[serde_json::Value], kind: &str, env: &str) -> Vec<(f64, f64)> {
    records
        .iter()
        .filter(|r| r["kind"] == kind)
        .filter_map(|r| {
            Some((
                r["step"].as_f64()?,
                r["per_task"][env]["success_rate"].as_f64()?,
            ))
        })
        .collect()
}
