//! Near misses: a valid value changed in one place so that the schema
//! refuses it.

use super::*;

/// Most near-miss candidates collected from one valid value.
pub(super) const MAX_MISSES: usize = 512;

/// Collects single-change near misses of a valid value.
pub(super) struct Misses<'a> {
    pub(super) generator: Generator<'a>,
    pub(super) found: Vec<(String, Gen)>,
}

impl Misses<'_> {
    /// Adds `root` with the node at `path` changed by `change`.
    pub(super) fn push(
        &mut self,
        root: &Gen,
        path: &[Seg],
        what: String,
        change: impl FnOnce(&mut Gen),
    ) {
        if self.found.len() >= MAX_MISSES {
            return;
        }
        let mut edited = root.clone();
        if let Some(node) = edited.at_mut(path) {
            change(node);
            let label = if path.is_empty() {
                what
            } else {
                format!("{what} at {}", pointer(path))
            };
            self.found.push((label, edited));
        }
    }

    /// Near misses of `node` (at `path` in `root`) against `schema`, then of
    /// its members or items.
    pub(super) fn walk(&mut self, root: &Gen, schema: &Value, node: &Gen, path: &mut Vec<Seg>) {
        if path.len() > 64 || self.found.len() >= MAX_MISSES {
            return;
        }
        let Some(m) = self.generator.flatten(schema, 0) else {
            return;
        };
        self.type_misses(root, &m, node, path);
        self.enum_misses(root, &m, path);
        match node {
            Gen::Str(s) => self.string_misses(root, &m, s, path),
            Gen::Num(n) => self.number_misses(root, &m, n, path),
            Gen::Obj(members) => self.object_misses(root, &m, members, path),
            Gen::Arr(items) => self.array_misses(root, &m, items, path),
            Gen::Null | Gen::Bool(_) => {}
        }
    }

    pub(super) fn type_misses(
        &mut self,
        root: &Gen,
        m: &Map<String, Value>,
        node: &Gen,
        path: &[Seg],
    ) {
        if !m.contains_key("type") {
            return;
        }
        let allowed = allowed_kinds(m);
        let candidates = [
            Gen::Str("x".into()),
            Gen::Num("7".into()),
            Gen::Obj(Vec::new()),
            Gen::Arr(Vec::new()),
            Gen::Bool(true),
            Gen::Null,
        ];
        let wrong = candidates
            .into_iter()
            .find(|c| !allowed.iter().any(|a| c.kind().fits(*a)));
        if let Some(wrong) = wrong {
            let names: Vec<&str> = allowed.iter().map(|k| k.name()).collect();
            let what = format!("{} instead of {}", wrong.kind().name(), names.join(" or "));
            self.push(root, path, what, |n| *n = wrong);
        }
        let integral_only = allowed.contains(&Kind::Integer) && !allowed.contains(&Kind::Number);
        if integral_only && matches!(node, Gen::Num(_)) {
            let what = "a fraction where an integer is wanted".to_owned();
            self.push(root, path, what, |n| *n = Gen::Num("1.5".into()));
        }
    }

    pub(super) fn enum_misses(&mut self, root: &Gen, m: &Map<String, Value>, path: &[Seg]) {
        let outsider = |listed: &[Value]| {
            [
                Value::from("zz-not-listed"),
                Value::from(987_654_321),
                Value::Null,
            ]
            .into_iter()
            .find(|c| !listed.contains(c))
        };
        if let Some(Value::Array(listed)) = m.get("enum")
            && let Some(v) = outsider(listed)
        {
            let what = "a value outside the enum".to_owned();
            self.push(root, path, what, |n| *n = Gen::from_value(&v));
        }
        if let Some(c) = m.get("const")
            && let Some(v) = outsider(std::slice::from_ref(c))
        {
            let what = "a value other than the const".to_owned();
            self.push(root, path, what, |n| *n = Gen::from_value(&v));
        }
    }

    pub(super) fn string_misses(
        &mut self,
        root: &Gen,
        m: &Map<String, Value>,
        s: &str,
        path: &[Seg],
    ) {
        let len = s.chars().count();
        if let Some(min) = usize_kw(m, "minLength").filter(|n| *n > 0 && *n <= len) {
            let short: String = s.chars().take(min - 1).collect();
            let what = format!("a string of {} characters (minLength {min})", min - 1);
            self.push(root, path, what, |n| *n = Gen::Str(short));
        }
        if let Some(max) = usize_kw(m, "maxLength").filter(|n| *n >= len && *n < 100_000) {
            let long: String = s
                .chars()
                .chain(std::iter::repeat('x'))
                .take(max + 1)
                .collect();
            let what = format!("a string of {} characters (maxLength {max})", max + 1);
            self.push(root, path, what, |n| *n = Gen::Str(long));
        }
        if m.get("pattern").is_some_and(Value::is_string) {
            for other in ["", "!", " ~ ", "\u{1}"] {
                let what = "a string not matching the pattern".to_owned();
                self.push(root, path, what, |n| *n = Gen::Str(other.into()));
            }
        }
    }

    pub(super) fn number_misses(
        &mut self,
        root: &Gen,
        m: &Map<String, Value>,
        n: &str,
        path: &[Seg],
    ) {
        let b = Bounds::of(m);
        if let Some(lo) = b.lo
            && let Some(text) = number_text(if b.lo_excl { lo } else { lo - 1.0 })
        {
            let what = format!("{text}, below the minimum {lo}");
            self.push(root, path, what, |node| *node = Gen::Num(text));
        }
        if let Some(hi) = b.hi
            && let Some(text) = number_text(if b.hi_excl { hi } else { hi + 1.0 })
        {
            let what = format!("{text}, above the maximum {hi}");
            self.push(root, path, what, |node| *node = Gen::Num(text));
        }
        if let Some(step) = Decimal::of(m).filter(|d| d.scale == 0 && d.mantissa > 1)
            && let Ok(v) = n.parse::<i128>()
        {
            let text = (v + 1).to_string();
            let what = format!("{text}, not a multiple of {}", step.mantissa);
            self.push(root, path, what, |node| *node = Gen::Num(text));
        }
    }

    pub(super) fn object_misses(
        &mut self,
        root: &Gen,
        m: &Map<String, Value>,
        members: &[(String, Gen)],
        path: &mut Vec<Seg>,
    ) {
        let props = m.get("properties").and_then(Value::as_object);
        let extra_schema = m.get("additionalProperties");
        for key in strings(m.get("required")) {
            if members.iter().any(|(k, _)| *k == key) {
                let what = format!("required property {key:?} removed");
                self.push(root, path, what, |n| {
                    if let Gen::Obj(ms) = n {
                        ms.retain(|(k, _)| *k != key);
                    }
                });
            }
        }
        self.extra_property_misses(root, m, members, path);
        for (key, value) in members {
            let declared = props.and_then(|p| p.get(key));
            let sub = match (declared, extra_schema) {
                (Some(s), _) => s,
                (None, Some(s)) if s.is_object() && !m.contains_key("patternProperties") => s,
                _ => continue,
            };
            path.push(Seg::Key(key.clone()));
            self.walk(root, sub, value, path);
            path.pop();
        }
    }

    /// An extra property where none (or only of another type) may be, and
    /// one property too many under `maxProperties`.
    pub(super) fn extra_property_misses(
        &mut self,
        root: &Gen,
        m: &Map<String, Value>,
        members: &[(String, Gen)],
        path: &[Seg],
    ) {
        let props = m.get("properties").and_then(Value::as_object);
        let taken = |k: &str| {
            props.is_some_and(|p| p.contains_key(k)) || members.iter().any(|(m, _)| m == k)
        };
        let key = self.generator.extra_key(taken);
        let add = |key: String, value: Gen| {
            move |n: &mut Gen| {
                if let Gen::Obj(ms) = n {
                    ms.push((key, value));
                }
            }
        };
        match m.get("additionalProperties") {
            Some(Value::Bool(false)) => {
                let what = format!("extra property {key:?} (additionalProperties is false)");
                self.push(root, path, what, add(key.clone(), Gen::Str("x".into())));
            }
            Some(Value::Object(extra)) if extra.contains_key("type") => {
                let allowed = allowed_kinds(extra);
                let wrong = [Gen::Str("x".into()), Gen::Num("7".into()), Gen::Null]
                    .into_iter()
                    .find(|c| !allowed.iter().any(|a| c.kind().fits(*a)));
                if let Some(wrong) = wrong {
                    let what =
                        format!("extra property {key:?} of a type additionalProperties refuses");
                    self.push(root, path, what, add(key.clone(), wrong));
                }
            }
            _ => {}
        }
        let closed = matches!(m.get("additionalProperties"), Some(Value::Bool(false)));
        if let Some(max) = usize_kw(m, "maxProperties").filter(|x| *x == members.len() && !closed) {
            let depth = self.generator.fuzz.max_depth;
            let value = self
                .generator
                .extra_value(m.get("additionalProperties"), depth)
                .unwrap_or(Gen::Null);
            let what = format!("{} properties (maxProperties {max})", max + 1);
            self.push(root, path, what, add(key, value));
        }
    }

    pub(super) fn array_misses(
        &mut self,
        root: &Gen,
        m: &Map<String, Value>,
        items: &[Gen],
        path: &mut Vec<Seg>,
    ) {
        let (prefix, rest) = item_schemas(m);
        if let Some(min) = usize_kw(m, "minItems").filter(|n| *n > 0 && *n <= items.len()) {
            let what = format!("{} items (minItems {min})", min - 1);
            self.push(root, path, what, |n| {
                if let Gen::Arr(xs) = n {
                    xs.truncate(min - 1);
                }
            });
        }
        if let Some(max) = usize_kw(m, "maxItems").filter(|n| *n >= items.len() && *n < 10_000) {
            let mut longer = items.to_vec();
            while longer.len() <= max {
                let schema = prefix.get(longer.len()).copied().or(rest);
                let depth = self.generator.fuzz.max_depth;
                let fresh = match schema {
                    Some(s) => self.generator.value(s, depth),
                    None => self.generator.any(depth),
                };
                let Some(item) = fresh.or_else(|| longer.last().cloned()) else {
                    break;
                };
                longer.push(item);
            }
            let what = format!("{} items (maxItems {max})", max + 1);
            self.push(root, path, what, |n| *n = Gen::Arr(longer));
        }
        if m.get("uniqueItems") == Some(&Value::Bool(true))
            && let Some(first) = items.first().cloned()
        {
            let room = usize_kw(m, "maxItems").is_none_or(|max| items.len() < max);
            let what = "a repeated item (uniqueItems)".to_owned();
            self.push(root, path, what, |n| {
                if let Gen::Arr(xs) = n {
                    if room {
                        xs.push(first);
                    } else if let Some(last) = xs.last_mut() {
                        *last = first;
                    }
                }
            });
        }
        for (i, item) in items.iter().enumerate() {
            let Some(schema) = prefix.get(i).copied().or(rest) else {
                continue;
            };
            path.push(Seg::Index(i));
            self.walk(root, schema, item, path);
            path.pop();
        }
    }
}
