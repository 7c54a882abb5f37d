//! Checks JSON the server sends against the JSDoc typedefs of `static/types.js`, field by field and
//! recursively: a field the server sends that the page's types do not declare (or one they require
//! that the server does not send) is an error. Used by the server tests on their test thread.

use serde_json::Value;
use std::collections::BTreeMap;

/// A type expression of JSDoc (the subset types.js uses).
#[derive(Debug, Clone, PartialEq)]
enum Ty {
    Number,
    String,
    Boolean,
    Null,
    /// `object`, `unknown`, `any`, `Blob`: not looked into.
    Opaque,
    Literal(String),
    Named(String),
    Array(Box<Ty>),
    Tuple(Vec<Ty>),
    /// Property name, optional, type.
    Object(Vec<(String, bool, Ty)>),
    Union(Vec<Ty>),
    Intersection(Vec<Ty>),
}

/// The typedefs of a JSDoc file, by name.
pub struct Typedefs(BTreeMap<String, Ty>);

/// The text inside the braces that open at `s[0]`, and the rest after the closing brace.
fn braced(s: &str) -> Option<(&str, &str)> {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some((&s[1..i], &s[i + 1..]));
                }
            }
            _ => {}
        }
    }
    None
}

impl Typedefs {
    /// Reads every `@typedef` of `js`, with its `@property` lines when it is an `{object}`.
    pub fn parse(js: &str) -> Typedefs {
        let mut defs = BTreeMap::new();
        for block in js.split("/**").skip(1) {
            let block = block.split("*/").next().unwrap_or("");
            let text: String = block
                .lines()
                .map(|l| l.trim().trim_start_matches('*').trim())
                .collect::<Vec<_>>()
                .join(" ");
            let Some(at) = text.find("@typedef {") else {
                continue;
            };
            let (ty, rest) = braced(&text[at + "@typedef ".len()..]).expect("typedef type");
            let name = rest.split_whitespace().next().expect("typedef name");
            let ty = if ty.trim() == "object" {
                let mut props = Vec::new();
                let mut rest = rest;
                while let Some(at) = rest.find("@property {") {
                    let (pty, after) =
                        braced(&rest[at + "@property ".len()..]).expect("property type");
                    let pname = after.split_whitespace().next().expect("property name");
                    let optional = pname.starts_with('[');
                    let pname = pname.trim_matches(|c| c == '[' || c == ']');
                    props.push((pname.to_owned(), optional, parse_type(pty)));
                    rest = after;
                }
                Ty::Object(props)
            } else {
                parse_type(ty)
            };
            defs.insert(name.to_owned(), ty);
        }
        Typedefs(defs)
    }

    /// Every difference between `value` and the typedef `name`, each with its JSON path.
    pub fn check(&self, name: &str, value: &Value) -> Vec<String> {
        let mut errors = Vec::new();
        self.check_ty(&Ty::Named(name.to_owned()), value, name, &mut errors);
        errors
    }

    fn resolve<'a>(&'a self, ty: &'a Ty) -> &'a Ty {
        match ty {
            Ty::Named(n) => self
                .0
                .get(n)
                .unwrap_or_else(|| panic!("types.js has no typedef {n}")),
            other => other,
        }
    }

    /// The properties of an object type (an intersection merges them); None if not an object.
    fn properties(&self, ty: &Ty) -> Option<Vec<(String, bool, Ty)>> {
        match self.resolve(ty) {
            Ty::Object(p) => Some(p.clone()),
            Ty::Intersection(parts) => {
                let mut all = Vec::new();
                for p in parts {
                    all.extend(self.properties(p)?);
                }
                Some(all)
            }
            _ => None,
        }
    }

    fn check_ty(&self, ty: &Ty, v: &Value, path: &str, errors: &mut Vec<String>) {
        let ty = self.resolve(ty);
        let mismatch = |errors: &mut Vec<String>| errors.push(format!("{path}: {v} is not {ty:?}"));
        match ty {
            Ty::Opaque => {}
            Ty::Number if v.is_number() => {}
            Ty::String if v.is_string() => {}
            Ty::Boolean if v.is_boolean() => {}
            Ty::Null if v.is_null() => {}
            Ty::Literal(l) if v.as_str() == Some(l) => {}
            Ty::Array(item) => match v.as_array() {
                Some(items) => {
                    for (i, x) in items.iter().enumerate() {
                        self.check_ty(item, x, &format!("{path}[{i}]"), errors);
                    }
                }
                None => mismatch(errors),
            },
            Ty::Tuple(items) => match v.as_array() {
                Some(xs) if xs.len() == items.len() => {
                    for (i, (t, x)) in items.iter().zip(xs).enumerate() {
                        self.check_ty(t, x, &format!("{path}[{i}]"), errors);
                    }
                }
                _ => mismatch(errors),
            },
            Ty::Union(alts) => {
                // One alternative must fit with no error at all.
                let fits = alts.iter().any(|a| {
                    let mut e = Vec::new();
                    self.check_ty(a, v, path, &mut e);
                    e.is_empty()
                });
                if !fits {
                    // Say why the closest alternative does not fit.
                    let best = alts
                        .iter()
                        .map(|a| {
                            let mut e = Vec::new();
                            self.check_ty(a, v, path, &mut e);
                            e
                        })
                        .min_by_key(Vec::len)
                        .unwrap_or_default();
                    errors.extend(best);
                }
            }
            Ty::Object(_) | Ty::Intersection(_) => {
                let props = self.properties(ty).expect("an object type");
                let Some(obj) = v.as_object() else {
                    return mismatch(errors);
                };
                for key in obj.keys() {
                    if !props.iter().any(|(n, _, _)| n == key) {
                        errors.push(format!(
                            "{path}.{key}: sent by the server but not declared in types.js"
                        ));
                    }
                }
                for (name, optional, pty) in &props {
                    match obj.get(name) {
                        Some(x) => self.check_ty(pty, x, &format!("{path}.{name}"), errors),
                        None if *optional => {}
                        None => errors.push(format!(
                            "{path}.{name}: declared in types.js but not sent by the server"
                        )),
                    }
                }
            }
            _ => mismatch(errors),
        }
    }
}

/// Parses a type expression: unions of intersections of postfix-`[]` primaries.
fn parse_type(s: &str) -> Ty {
    let tokens = tokenize(s);
    let mut p = Parser { tokens, at: 0 };
    let ty = p.union();
    assert_eq!(p.at, p.tokens.len(), "unparsed type text in {s:?}");
    ty
}

fn tokenize(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '\'' || c == '"' {
            chars.next();
            let mut lit = String::from("'");
            for d in chars.by_ref() {
                if d == c {
                    break;
                }
                lit.push(d);
            }
            out.push(lit);
        } else if c.is_alphanumeric() || c == '_' || c == '.' {
            let mut word = String::new();
            while let Some(&d) = chars.peek() {
                if d.is_alphanumeric() || d == '_' || d == '.' {
                    word.push(d);
                    chars.next();
                } else {
                    break;
                }
            }
            out.push(word);
        } else {
            out.push(c.to_string());
            chars.next();
        }
    }
    out
}

struct Parser {
    tokens: Vec<String>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.at).map(String::as_str)
    }

    fn eat(&mut self, t: &str) -> bool {
        if self.peek() == Some(t) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, t: &str) {
        assert!(
            self.eat(t),
            "expected {t:?} at {:?}",
            &self.tokens[self.at..]
        );
    }

    /// `part (sep part)*`, made into `make(parts)` when there are several.
    fn joined(&mut self, sep: &str, part: fn(&mut Self) -> Ty, make: fn(Vec<Ty>) -> Ty) -> Ty {
        let mut parts = vec![part(self)];
        while self.eat(sep) {
            parts.push(part(self));
        }
        if parts.len() == 1 {
            parts.remove(0)
        } else {
            make(parts)
        }
    }

    fn union(&mut self) -> Ty {
        self.joined(
            "|",
            |p| p.joined("&", Self::postfix, Ty::Intersection),
            Ty::Union,
        )
    }

    fn postfix(&mut self) -> Ty {
        let mut ty = self.primary();
        while self.peek() == Some("[")
            && self.tokens.get(self.at + 1).map(String::as_str) == Some("]")
        {
            self.at += 2;
            ty = Ty::Array(Box::new(ty));
        }
        ty
    }

    fn primary(&mut self) -> Ty {
        let t = self.tokens[self.at].clone();
        self.at += 1;
        match t.as_str() {
            "(" => {
                let ty = self.union();
                self.expect(")");
                ty
            }
            "[" => {
                let mut items = Vec::new();
                while !self.eat("]") {
                    items.push(self.union());
                    self.eat(",");
                }
                Ty::Tuple(items)
            }
            "{" => {
                let mut props = Vec::new();
                while !self.eat("}") {
                    let name = self.tokens[self.at].clone();
                    self.at += 1;
                    let optional = self.eat("?");
                    self.expect(":");
                    props.push((name, optional, self.union()));
                    if !self.eat(",") {
                        self.eat(";");
                    }
                }
                Ty::Object(props)
            }
            "number" => Ty::Number,
            "string" => Ty::String,
            "boolean" => Ty::Boolean,
            "null" => Ty::Null,
            "object" | "unknown" | "any" | "Blob" => Ty::Opaque,
            "Array" => {
                self.expect("<");
                let item = self.union();
                self.expect(">");
                Ty::Array(Box::new(item))
            }
            lit if lit.starts_with('\'') => Ty::Literal(lit[1..].to_owned()),
            name => Ty::Named(name.to_owned()),
        }
    }
}

#[test]
fn the_checker_finds_undeclared_and_missing_fields() {
    let defs = Typedefs::parse(
        "/**\n * @typedef {object} A\n * @property {number} x\n * @property {B|null} [b]\n */\n\
         /** @typedef {{kind: 'k', n?: number[]} | {kind: 'j'}} B */",
    );
    let ok = serde_json::json!({"x": 1, "b": {"kind": "k", "n": [1, 2]}});
    assert_eq!(defs.check("A", &ok), Vec::<String>::new());
    assert!(
        defs.check("A", &serde_json::json!({"x": 1})).is_empty(),
        "b is optional"
    );
    let extra = defs.check("A", &serde_json::json!({"x": 1, "y": 2}));
    assert_eq!(
        extra,
        vec!["A.y: sent by the server but not declared in types.js"]
    );
    let missing = defs.check("A", &serde_json::json!({"b": null}));
    assert_eq!(
        missing,
        vec!["A.x: declared in types.js but not sent by the server"]
    );
    assert!(!defs
        .check(
            "A",
            &serde_json::json!({"x": 1, "b": {"kind": "j", "n": [1]}})
        )
        .is_empty());
    assert!(!defs.check("A", &serde_json::json!({"x": "1"})).is_empty());
}
