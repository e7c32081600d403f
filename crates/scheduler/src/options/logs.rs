//! The "logs" flag set (component-base `logs/api/v1`) and the tracing subscriber it configures:
//! klog text (default) or component-base JSON lines on stderr (see [`crate::klog`]), klog
//! verbosity mapped onto tracing levels.

use clap::{ArgAction, Args};
use tracing_subscriber::fmt::writer::{BoxMakeWriter, MakeWriterExt as _};

use super::values::{self, go_quote, VModuleItem};
use crate::config::Duration;

/// Logging flags.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "logs")]
pub struct LogsOptions {
    /// Sets the log format. Permitted formats: "json" (gated by LoggingBetaOptions), "text".
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "text")]
    pub logging_format: String,
    /// Maximum number of seconds between log flushes
    #[arg(verbatim_doc_comment, long, value_name = "duration", default_value = "5s", value_parser = values::parse_duration)]
    pub log_flush_frequency: Duration,
    /// number for the log level verbosity
    #[arg(verbatim_doc_comment, short = 'v', long = "v", value_name = "Level", default_value = "0", value_parser = values::parse_level)]
    pub verbosity: u32,
    /// comma-separated list of pattern=N settings for file-filtered logging (only works for text log format)
    #[arg(verbatim_doc_comment, long, value_name = "pattern=N,...", action = ArgAction::Append, value_parser = values::parse_vmodule)]
    pub vmodule: Vec<Vec<VModuleItem>>,
    /// [Alpha] In text format, write error messages to stderr and info messages to stdout. The default is to write a single stream to stdout. Enable the LoggingAlphaOptions feature gate to use this.
    #[arg(verbatim_doc_comment, long, value_name = "", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = values::parse_bool, action = ArgAction::Set)]
    pub log_text_split_stream: bool,
    /// [Alpha] In text format with split output streams, the info messages can be buffered for a while to increase performance. The default value of zero bytes disables buffering. The size can be specified as number of bytes (512), multiples of 1000 (1K), multiples of 1024 (2Ki), or powers of those (3M, 4G, 5Mi, 6Gi). Enable the LoggingAlphaOptions feature gate to use this.
    #[arg(verbatim_doc_comment, long, value_name = "quantity", default_value = "0", value_parser = values::parse_quantity)]
    pub log_text_info_buffer_size: u64,
    /// [Alpha] In JSON format, write error messages to stderr and info messages to stdout. The default is to write a single stream to stdout. Enable the LoggingAlphaOptions feature gate to use this.
    #[arg(verbatim_doc_comment, long, value_name = "", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = values::parse_bool, action = ArgAction::Set)]
    pub log_json_split_stream: bool,
    /// [Alpha] In JSON format with split output streams, the info messages can be buffered for a while to increase performance. The default value of zero bytes disables buffering. The size can be specified as number of bytes (512), multiples of 1000 (1K), multiples of 1024 (2Ki), or powers of those (3M, 4G, 5Mi, 6Gi). Enable the LoggingAlphaOptions feature gate to use this.
    #[arg(verbatim_doc_comment, long, value_name = "quantity", default_value = "0", value_parser = values::parse_quantity)]
    pub log_json_info_buffer_size: u64,
}

impl LogsOptions {
    /// Upstream's `logsapi.Validate`; `Err` holds the aggregate message printed before exit 1.
    pub fn validate(&self, alpha: bool, beta: bool) -> Result<(), String> {
        let mut errs = Vec::new();
        if self.log_flush_frequency.as_nanos() <= 0 {
            errs.push(format!(
                "flushFrequency: Invalid value: {}: Must be greater than zero",
                go_quote(&self.log_flush_frequency.to_string())
            ));
        }
        match self.logging_format.as_str() {
            "text" => {}
            "json" if !beta => {
                errs.push("format: Forbidden: Log format json is disabled, see LoggingBetaOptions feature".into())
            }
            "json" => {}
            other => errs.push(format!("format: Invalid value: {}: Unsupported log format", go_quote(other))),
        }
        if !self.vmodule.is_empty() && self.logging_format != "text" {
            errs.push("vmodule: Forbidden: Only supported for text log format".into());
        }
        let gate = "Forbidden: Feature LoggingAlphaOptions is disabled";
        for (on, path) in [
            (self.log_text_split_stream, "options.text.splitStream"),
            (self.log_text_info_buffer_size != 0, "options.text.infoBufferSize"),
            (self.log_json_split_stream, "options.json.splitStream"),
            (self.log_json_info_buffer_size != 0, "options.json.infoBufferSize"),
        ] {
            if on && !alpha {
                errs.push(format!("{path}: {gate}"));
            }
        }
        match errs.len() {
            0 => Ok(()),
            1 => Err(errs.remove(0)),
            _ => Err(format!("[{}]", errs.join(", "))),
        }
    }

    /// The tracing level filter for `-v`: klog V(0..1) is info, V(2..4) debug, V(5+) trace.
    pub fn level(&self) -> tracing::Level {
        match self.verbosity {
            0 | 1 => tracing::Level::INFO,
            2..=4 => tracing::Level::DEBUG,
            _ => tracing::Level::TRACE,
        }
    }

    /// Installs the global subscriber (`RUST_LOG` overrides `-v` for debugging this build).
    pub fn init(&self) {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(self.level().as_str().to_ascii_lowercase()));
        let split = match self.logging_format.as_str() {
            "json" => self.log_json_split_stream,
            _ => self.log_text_split_stream,
        };
        let writer = if split {
            BoxMakeWriter::new(std::io::stderr.with_max_level(tracing::Level::ERROR).or_else(std::io::stdout))
        } else {
            BoxMakeWriter::new(std::io::stderr)
        };
        let format = match self.logging_format.as_str() {
            "json" => crate::klog::Format::Json,
            _ => crate::klog::Format::Text,
        };
        // RUST_LOG may widen the filter past `-v`; the formatter then must not drop the extra events.
        let verbosity = if std::env::var_os("RUST_LOG").is_some() { u32::MAX } else { self.verbosity };
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(writer)
            .event_format(crate::klog::KlogFormat::new(format, verbosity))
            .try_init();
        if !self.vmodule.is_empty() {
            tracing::warn!(
                "--vmodule is accepted but has no effect in this build: verbosity is per level, not per file"
            );
        }
    }
}
