//! The dashboard's access token: made from the OS's randomness at start or given by the user,
//! compared in constant time, and found in a request's `Authorization: Bearer` or cookie header;
//! pure functions called from the caller's thread at start and from the server's tokio threads per
//! request.
//!
//! The Origin/Host guard ([`crate::guard`]) stops web pages, but not another local user or
//! process talking to 127.0.0.1 directly, and the engine may run as root with real-time
//! priorities. So, as Jupyter does, the server makes a random token at start and prints it in
//! the URL to open; only whoever sees that output can use the dashboard. The page trades the
//! token for an HttpOnly, SameSite=Strict cookie (the server's `auth` module); scripts send it as a
//! Bearer token.

use std::fmt;
use subtle::ConstantTimeEq;

/// Random bytes in a generated token: 192 bits, written as 48 hex digits.
const GENERATED_BYTES: usize = 24;

/// Shortest token accepted: 16 of the 66 allowed characters are about 96 bits when chosen at
/// random, and a guesser is slowed down after wrong tokens (the server's backoff).
pub const MIN_LEN: usize = 16;

/// Longest token accepted.
pub const MAX_LEN: usize = 256;

/// What a given token may be made of, as usage errors say it. These characters need no
/// escaping in a URL's query, a cookie value or a Bearer header.
pub const ALLOWED: &str = "16 to 256 characters of A-Z a-z 0-9 - . _ ~";

/// Why a token could not be made: a given one breaks the rules ([`ALLOWED`]), or the OS gave no
/// randomness for a generated one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// `--token ""`.
    #[error(
        "the token must not be empty: allowed are {ALLOWED} (or --no-token to serve without one)"
    )]
    Empty,
    /// Shorter than [`MIN_LEN`]: guessable.
    #[error(
        "the token is {chars} characters long, too short to be hard to guess: allowed are \
         {ALLOWED} (`openssl rand -hex 16` makes one)"
    )]
    TooShort {
        /// Its length in characters.
        chars: usize,
    },
    /// Longer than [`MAX_LEN`].
    #[error("the token is {bytes} bytes long: allowed are {ALLOWED}")]
    TooLong {
        /// Its length in bytes.
        bytes: usize,
    },
    /// A character outside [`ALLOWED`] (the first one found).
    #[error("the token contains {0:?}: allowed are {ALLOWED}")]
    Character(char),
    /// getrandom(2) failed.
    #[error("could not get random bytes for the access token: {0}")]
    Random(#[source] getrandom::Error),
}

/// A secret that grants use of the dashboard. Its `Debug` does not show it, and comparing two
/// tokens (`==`) takes constant time like [`Token::matches`].
#[derive(Clone, Eq)]
pub struct Token(String);

impl Token {
    /// A new random token from the operating system's randomness (getrandom(2)).
    pub fn generate() -> Result<Token, TokenError> {
        let mut bytes = [0u8; GENERATED_BYTES];
        getrandom::fill(&mut bytes).map_err(TokenError::Random)?;
        Ok(Token(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// A token the user chose (`--token`); `Err` says what is wrong and what is allowed.
    pub fn new(value: &str) -> Result<Token, TokenError> {
        if value.is_empty() {
            return Err(TokenError::Empty);
        }
        if value.len() > MAX_LEN {
            return Err(TokenError::TooLong { bytes: value.len() });
        }
        if let Some(c) = value
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~')))
        {
            return Err(TokenError::Character(c));
        }
        if value.len() < MIN_LEN {
            return Err(TokenError::TooShort { chars: value.len() });
        }
        Ok(Token(value.to_owned()))
    }

    /// The token's text, for the URL printed at start and the cookie.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `candidate` is this token. The bytes are compared in constant time, so how long
    /// a refusal takes does not tell how much of a guess was right. Only the length can show:
    /// it is not secret (a generated token always has 48 characters).
    pub fn matches(&self, candidate: &[u8]) -> bool {
        constant_time_eq(self.0.as_bytes(), candidate)
    }
}

/// The one place tokens are compared.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    #[cfg(test)]
    tests::CONSTANT_TIME_CALLS.with(|n| n.set(n.get() + 1));
    // `subtle` answers a length mismatch at once and otherwise looks at every byte.
    bool::from(a.ct_eq(b))
}

impl PartialEq for Token {
    fn eq(&self, other: &Token) -> bool {
        self.matches(other.0.as_bytes())
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(…)")
    }
}

impl std::str::FromStr for Token {
    type Err = TokenError;
    fn from_str(s: &str) -> Result<Token, TokenError> {
        Token::new(s)
    }
}

/// Who may use the dashboard, on top of the Origin/Host guard.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Access {
    /// A random token made at start and printed in the URL (the default).
    #[default]
    GeneratedToken,
    /// This token (`--token`).
    Token(Token),
    /// No token (`--no-token`): any local user or process can drive the engine; a warning
    /// says so at start.
    Open,
}

/// The token in an `Authorization` header value, if it uses the Bearer scheme (whose name is
/// case-insensitive, RFC 9110 §11.1).
pub fn bearer(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// The values of the cookies called `name` in a `Cookie` header value ("a=1; b=2", RFC 6265
/// §5.4). A browser can send several with one name (set for different paths).
pub fn cookie_values<'a>(cookie: &'a str, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    cookie.split(';').filter_map(move |pair| {
        let (n, v) = pair.trim().split_once('=')?;
        (n == name).then_some(v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        /// How often this thread called `constant_time_eq`.
        pub(super) static CONSTANT_TIME_CALLS: Cell<u32> = const { Cell::new(0) };
    }

    fn calls() -> u32 {
        CONSTANT_TIME_CALLS.with(Cell::get)
    }

    #[test]
    fn every_comparison_goes_through_the_constant_time_function() {
        let t = Token::new("abcdef0123456789").unwrap();
        let cases: &[(&[u8], bool)] = &[
            (b"abcdef0123456789", true),
            // Same length, last byte wrong; and first byte wrong.
            (b"abcdef012345678X", false),
            (b"Xbcdef0123456789", false),
            // Different lengths: a prefix, the token with more after it, nothing.
            (b"abcdef", false),
            (b"abcdef0123456789X", false),
            (b"", false),
        ];
        for (candidate, expected) in cases {
            let before = calls();
            assert_eq!(
                t.matches(candidate),
                *expected,
                "{}",
                String::from_utf8_lossy(candidate)
            );
            assert_eq!(
                calls(),
                before + 1,
                "comparing with {:?} did not go through constant_time_eq",
                String::from_utf8_lossy(candidate)
            );
        }
        let before = calls();
        assert!(t == t.clone());
        assert!(t != Token::new("abcdef012345678X").unwrap());
        assert_eq!(calls(), before + 2, "== compares in constant time too");
    }

    #[test]
    fn a_wrong_token_of_the_same_length_and_a_prefix_are_refused() {
        let t = Token::generate().unwrap();
        let s = t.as_str();
        let mut wrong = s.as_bytes().to_vec();
        wrong[s.len() / 2] = if wrong[s.len() / 2] == b'0' {
            b'1'
        } else {
            b'0'
        };
        assert_eq!(wrong.len(), s.len());
        assert!(!t.matches(&wrong));
        assert!(!t.matches(&s.as_bytes()[..s.len() - 1]));
        assert!(!t.matches(&s.as_bytes()[..1]));
        assert!(t.matches(s.as_bytes()));
    }

    #[test]
    fn generated_tokens_are_192_random_bits_in_hex() {
        let a = Token::generate().unwrap();
        let b = Token::generate().unwrap();
        for t in [&a, &b] {
            assert_eq!(t.as_str().len(), 48);
            assert!(t
                .as_str()
                .bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
            // A generated token passes the rules for given ones, so it survives URL and cookie.
            assert_eq!(Token::new(t.as_str()).as_ref(), Ok(t));
        }
        assert_ne!(a.as_str(), b.as_str());
        assert_eq!(
            format!("{a:?}"),
            "Token(…)",
            "Debug does not show the secret"
        );
    }

    #[test]
    fn given_tokens_must_be_url_and_cookie_safe() {
        for ok in [
            "a-b.c_d~e0123456",
            "ABCxyz0190123456789",
            &"z".repeat(MIN_LEN),
            &"z".repeat(MAX_LEN),
        ] {
            assert_eq!(Token::new(ok).unwrap().as_str(), ok);
        }
        let empty = Token::new("").unwrap_err().to_string();
        assert!(
            empty.contains("must not be empty") && empty.contains(ALLOWED),
            "{empty}"
        );
        for bad in ["a b", "a;b", "a=b", "a/b", "a+b", "tök", "a\"b", "a%20"] {
            let e = Token::new(bad).unwrap_err().to_string();
            assert!(e.contains("contains") && e.contains(ALLOWED), "{bad}: {e}");
        }
        for short in ["x", "abc", &"z".repeat(MIN_LEN - 1)] {
            let e = Token::new(short).unwrap_err().to_string();
            assert!(
                e.contains(&format!("is {} characters long, too short", short.len()))
                    && e.contains(ALLOWED),
                "{short}: {e}"
            );
        }
        let long = Token::new(&"z".repeat(MAX_LEN + 1))
            .unwrap_err()
            .to_string();
        assert!(long.contains("257 bytes"), "{long}");
    }

    #[test]
    fn bearer_and_cookie_headers_are_read() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("BEARER abc"), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
        assert_eq!(bearer("abc"), None);

        let header = "other=1; xrunlab-token-8517=abc;xrunlab-token-8517=def ; x=";
        assert_eq!(
            cookie_values(header, "xrunlab-token-8517").collect::<Vec<_>>(),
            ["abc", "def"]
        );
        assert_eq!(cookie_values(header, "xrunlab-token-8518").count(), 0);
        assert_eq!(cookie_values("", "a").count(), 0);
        assert_eq!(cookie_values("a", "a").count(), 0);
    }
}
