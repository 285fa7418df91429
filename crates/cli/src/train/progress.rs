//! Progress of a run: a bar on a terminal (indicatif), plain lines otherwise.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// What one progress update shows.
pub struct Update<'a> {
    pub step: usize,
    pub epoch: u64,
    pub loss: f64,
    pub lr: f64,
    /// Images/s or tokens/s, averaged over this process's steps.
    pub throughput: f64,
    pub gpus: &'a str,
}

pub struct Progress {
    /// Nothing is shown (the processes of a world other than process 0, which shows it).
    silent: bool,
    bar: Option<ProgressBar>,
    total: usize,
    first: usize,
    every: usize,
    unit: &'static str,
    started: Instant,
}

impl Progress {
    /// Progress over steps `first..total`: a bar when stderr is a terminal, else a plain line
    /// every `every` steps.
    pub fn new(first: usize, total: usize, every: usize, unit: &'static str) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(
                Some(total as u64),
                ProgressDrawTarget::stderr_with_hz(4),
            );
            let style = ProgressStyle::with_template(
                "{bar:28.cyan/blue} {pos:>6}/{len} steps  {msg}  ETA {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.set_position(first as u64);
            bar.reset_eta();
            bar
        });
        Self {
            silent: false,
            bar,
            total,
            first,
            every: every.max(1),
            unit,
            started: Instant::now(),
        }
    }

    /// Progress that shows nothing.
    pub fn silent() -> Self {
        Self {
            silent: true,
            bar: None,
            total: 0,
            first: 0,
            every: 1,
            unit: "",
            started: Instant::now(),
        }
    }

    pub fn update(&self, u: &Update) {
        if self.silent {
            return;
        }
        let gpus = if u.gpus.is_empty() {
            String::new()
        } else {
            format!("  {}", u.gpus)
        };
        let text = format!(
            "epoch {}  loss {:.4}  lr {:.2e}  {:.1} {}{gpus}",
            u.epoch + 1,
            u.loss,
            u.lr,
            u.throughput,
            self.unit
        );
        match &self.bar {
            Some(bar) => {
                bar.set_position(u.step as u64);
                bar.set_message(text);
            }
            None if u.step.is_multiple_of(self.every) || u.step == self.total => {
                println!(
                    "step {:>6}/{}  {text}  ETA {}",
                    u.step,
                    self.total,
                    eta(
                        self.started.elapsed(),
                        u.step - self.first,
                        self.total - u.step
                    )
                );
            }
            None => {}
        }
    }

    /// A line printed above the bar (or plainly).
    pub fn println(&self, line: &str) {
        if self.silent {
            return;
        }
        match &self.bar {
            Some(bar) => bar.println(line),
            None => println!("{line}"),
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

fn eta(elapsed: Duration, done: usize, left: usize) -> String {
    if done == 0 {
        return "?".into();
    }
    let secs = (elapsed.as_secs_f64() / done as f64 * left as f64).round() as u64;
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m{:02}s", s / 60, s % 60),
        s => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}
