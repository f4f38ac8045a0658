//! Values rendered as Go's `%v` renders decoded JSON, because the real server's strategic
//! merge errors quote the patch that way (`map: map[image:x] does not contain declared merge
//! key: name`), and clients match on those messages.

use std::fmt::Write;

use serde_json::Value;

/// `%v` of a decoded JSON value: `map[k:v …]` with sorted keys, `[a b]`, `<nil>`.
pub(crate) fn go_value(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// `%v` of several lists side by side, as `fmt.Sprint` renders a slice of them.
pub(crate) fn go_lists(lists: &[&[Value]]) -> String {
    let mut out = String::from("[");
    for (i, list) in lists.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        write_list(&mut out, list);
    }
    out.push(']');
    out
}

/// The Go type name `reflect.TypeOf` gives a decoded JSON value.
pub(crate) fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "%!s(<nil>)",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => write!(out, "{b}").expect("a String"),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e21 => {
                write!(out, "{f:.0}").expect("a String");
            }
            _ => write!(out, "{n}").expect("a String"),
        },
        Value::String(s) => out.push_str(s),
        Value::Array(items) => write_list(out, items),
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push_str("map[");
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                write_value(out, &map[k]);
            }
            out.push(']');
        }
    }
}

fn write_list(out: &mut String, items: &[Value]) {
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        write_value(out, item);
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn renders_as_go_does() {
        // From the real server: `map: map[image:x] does not contain declared merge key: name`.
        assert_eq!(go_value(&json!({"image": "x"})), "map[image:x]");
        assert_eq!(
            go_value(&json!({"name": "a", "ports": [{"containerPort": 80}], "x": null})),
            "map[name:a ports:[map[containerPort:80]] x:<nil>]"
        );
        assert_eq!(go_value(&json!(1.5)), "1.5");
        assert_eq!(go_value(&json!(2.0)), "2");
        assert_eq!(go_lists(&[&[json!(1)], &[json!([1])]]), "[[1] [[1]]]");
        assert_eq!(go_type(&json!([])), "[]interface {}");
    }
}
