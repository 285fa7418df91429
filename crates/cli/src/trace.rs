//! Logs and the per-rank timeline: `RUST_LOG` for tracing output, `firemesh train --trace` for
//! a Chrome trace.

use crate::{Error, Result};

/// `RUST_LOG=firemesh=debug` (say) prints tracing output; `trace` writes the per-rank
/// timeline (spans of targets `firemesh::rank` and `firemesh::comm`) as a Chrome trace, whose
/// file is complete when the returned guard drops.
pub fn init(trace: Option<&std::path::Path>) -> Result<Option<tracing_chrome::FlushGuard>> {
    use tracing_subscriber::filter::{EnvFilter, LevelFilter, Targets};
    use tracing_subscriber::prelude::*;
    let log = std::env::var_os("RUST_LOG").is_some().then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_filter(EnvFilter::from_default_env())
    });
    let (chrome, flush) = match trace {
        Some(path) => {
            let file = std::fs::File::create(path).map_err(|e| {
                Error::Invalid(format!("--trace {}: cannot create it: {e}", path.display()))
            })?;
            let (layer, flush) = tracing_chrome::ChromeLayerBuilder::new()
                .writer(std::io::BufWriter::new(file))
                .include_args(true)
                .include_locations(false)
                .build();
            let timeline = Targets::new()
                .with_target("firemesh::rank", LevelFilter::TRACE)
                .with_target("firemesh::comm", LevelFilter::TRACE);
            (Some(layer.with_filter(timeline)), Some(flush))
        }
        None => (None, None),
    };
    if log.is_some() || chrome.is_some() {
        tracing_subscriber::registry().with(log).with(chrome).init();
    }
    Ok(flush)
}
