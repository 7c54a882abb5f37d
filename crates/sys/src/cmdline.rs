//! The kernel command line (`/proc/cmdline`) split into words, with the bare-word and `key=value`
//! lookups doctor's checks and result fingerprints ask of it; read on non-real-time threads.

/// The kernel command line, split into words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmdline {
    words: Vec<String>,
}

impl Cmdline {
    /// Parses `/proc/cmdline` text.
    pub fn parse(text: &str) -> Cmdline {
        Cmdline {
            words: text.split_whitespace().map(str::to_owned).collect(),
        }
    }

    /// Whether a bare word such as "threadirqs" is present (before any "--", after which the
    /// words belong to init).
    pub fn has(&self, word: &str) -> bool {
        self.kernel_words().any(|w| w == word)
    }

    /// The value of `key=value` (the last one wins, as in the kernel).
    pub fn value(&self, key: &str) -> Option<&str> {
        self.kernel_words()
            .filter_map(|w| w.strip_prefix(key)?.strip_prefix('='))
            .last()
    }

    fn kernel_words(&self) -> impl Iterator<Item = &str> {
        self.words
            .iter()
            .map(String::as_str)
            .take_while(|w| *w != "--")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_values_and_init_arguments() {
        let c = Cmdline::parse(
            "quiet preempt=full threadirqs preempt=voluntary -- threadirqs2 nohz_full=1",
        );
        assert!(c.has("threadirqs") && !c.has("threadirqs2"));
        assert_eq!(c.value("preempt"), Some("voluntary"));
        assert_eq!(c.value("nohz_full"), None, "words after -- belong to init");
    }
}
