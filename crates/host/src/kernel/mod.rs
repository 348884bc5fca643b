//! What the kernel says about itself: tracepoint formats (tracefs), its symbols
//! (/proc/kallsyms) and its type information (BTF). Pure parsers over text or bytes; the
//! files are read by the caller.

pub mod btf;
pub mod kallsyms;
pub mod tracepoint;
