//! Property tests of the dashboard's API bodies: `PUT /api/config` bodies made from the real
//! config with any node replaced by a hostile JSON value, unknown keys added, and bodies of any
//! text, merged onto the default config as the server does. The property: a valid config, or a
//! refusal (400 or 422) that names the field and what is allowed; never a panic, never an
//! allocation past the capped heap. Runs on the test threads.

use cap::Cap;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::alloc::System;
use xrunlab_dash::api::merge_config;
use xrunlab_engine::EngineConfig;

#[global_allocator]
static HEAP: Cap<System> = Cap::new(System, 256 << 20);

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 2_000,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Every node's JSON pointer below the root.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                pointers(child, format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                pointers(child, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
    if !at.is_empty() {
        out.push(at);
    }
}

fn hostile_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop_oneof![
            Just(u64::MAX),
            Just(1 << 32),
            Just(0),
            Just(1_000_000_000_000)
        ]
        .prop_map(Value::from),
        Just(json!(i64::MIN)),
        prop_oneof![Just(1e308), Just(-1.0), Just(0.5), Just(5e-324)].prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,16}".prop_map(Value::from),
        Just(json!([])),
        Just(json!({})),
        Just(json!([0, 1, 65535, 4294967295u64, -1])),
        Just(json!({"nested": {"deeper": [null]}})),
    ]
}

/// The checks on one answer to `body`.
fn holds(body: &Value) -> Result<(), TestCaseError> {
    let current = EngineConfig::default();
    match merge_config(&current, body) {
        Ok(r) => prop_assert!(r.config.validate().is_ok()),
        Err(e) => {
            prop_assert!(e.status == 400 || e.status == 422, "{:?}", e);
            prop_assert!(!e.error.is_empty());
            if e.status == 422 {
                let field = e.field.clone().unwrap_or_default();
                prop_assert!(
                    !field.is_empty() && e.path.is_some() && e.allowed.is_some(),
                    "{:?}",
                    e
                );
                prop_assert!(e.error.contains(&field), "{:?}", e);
            } else if body.is_object() {
                // A body of fields refused whole names the field at fault.
                prop_assert!(e.path.is_some() || e.error.contains("config"), "{:?}", e);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn config_bodies_with_hostile_values_give_a_valid_config_or_name_the_field(
        nodes in prop::collection::vec((any::<prop::sample::Index>(), hostile_value()), 1..4),
        preset in prop::option::of(prop_oneof![Just(json!("optimal")), Just(json!("standard")), Just(json!("custom")), hostile_value()]),
        device in prop::option::of(hostile_value()),
        unknown in prop::option::of("[a-z_]{1,10}"),
    ) {
        let mut body = serde_json::to_value(EngineConfig::default()).unwrap();
        for (node, with) in nodes {
            let mut at = Vec::new();
            pointers(&body, String::new(), &mut at);
            if at.is_empty() {
                break;
            }
            let p = node.get(&at).clone();
            *body.pointer_mut(&p).unwrap() = with;
        }
        if let Value::Object(m) = &mut body {
            if let Some(p) = preset {
                m.insert("preset".into(), p);
            }
            if let Some(d) = device {
                m.insert("device".into(), d);
            }
            if let Some(k) = unknown {
                m.insert(k, json!(1));
            }
        }
        holds(&body)?;
    }

    #[test]
    fn bodies_of_any_json_give_a_valid_config_or_a_refusal(text in ".{0,80}|\\{\"[a-z_.]{1,12}\": ?(-?[0-9]{1,22}|null|\"[a-z]{0,5}\"|\\[\\]|\\{\\})\\}") {
        if let Ok(body) = serde_json::from_str::<Value>(&text) {
            holds(&body)?;
        }
    }
}

#[test]
fn a_hostile_body_is_refused_naming_its_field() {
    let e = merge_config(&EngineConfig::default(), &json!({"sines": u64::MAX})).unwrap_err();
    assert_eq!(
        (e.status, e.field.as_deref()),
        (422, Some("sines")),
        "{e:?}"
    );
    assert!(e.allowed.is_some());
}
