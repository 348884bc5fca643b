//! The `firehose` binary: parses arguments and hands each subcommand to its module.
//! One file per subcommand: `serve.rs`, `load.rs`, ...

fn main() {}
