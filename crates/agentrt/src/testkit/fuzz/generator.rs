//! Valid values generated from a schema, keyword by keyword.

use super::*;

pub(super) const DIGITS: &[u8] = b"0123456789";
pub(super) const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
pub(super) const PUNCT: &[char] = &[' ', '-', '_', '.', ',', ':', '/', '@', '#', '%', '+', '='];
pub(super) const TRICKY: &[char] = &[
    '"', '\\', '<', '>', '&', '\'', '\n', '\t', '\u{1}', '\u{7f}',
];
pub(super) const WIDE: &[char] = &[
    'é', 'ß', 'ж', '日', '本', '\u{2028}', '\u{200b}', '😀', '🚀', '\u{e9}',
];
pub(super) const WORDS: &[&str] = &[
    "alpha", "build", "cache", "delta", "docs", "main", "notes", "report", "src", "temp",
];

/// Generates values from schemas.
pub(super) struct Generator<'a> {
    pub(super) fuzz: &'a Fuzz,
    pub(super) root: &'a Value,
    pub(super) rng: Rng,
}

impl<'a> Generator<'a> {
    pub(super) fn new(fuzz: &'a Fuzz, root: &'a Value, rng: Rng) -> Generator<'a> {
        Generator { fuzz, root, rng }
    }

    /// The schema's keywords with `$ref` and `allOf` merged in; `None` for
    /// the schema `false` (or a reference that cannot be followed).
    pub(super) fn flatten(&self, schema: &Value, hops: usize) -> Option<Map<String, Value>> {
        if hops > 32 {
            return None;
        }
        let mut m = match schema {
            Value::Bool(false) => return None,
            Value::Object(m) => m.clone(),
            _ => Map::new(),
        };
        if let Some(Value::String(reference)) = m.remove("$ref") {
            let target = self.resolve(&reference)?;
            let mut base = self.flatten(target, hops + 1)?;
            merge(&mut base, m);
            m = base;
        }
        if let Some(Value::Array(parts)) = m.remove("allOf") {
            for part in &parts {
                let part = self.flatten(part, hops + 1)?;
                merge(&mut m, part);
            }
        }
        Some(m)
    }

    /// A reference inside the document (`#`, `#/$defs/x`, …).
    pub(super) fn resolve(&self, reference: &str) -> Option<&'a Value> {
        let pointer = reference.strip_prefix('#')?;
        if pointer.is_empty() {
            return Some(self.root);
        }
        self.root.pointer(pointer)
    }

    /// Picks one branch of each `anyOf`/`oneOf` and merges it in.
    pub(super) fn choose_branches(&mut self, m: &mut Map<String, Value>) -> Option<()> {
        for _ in 0..8 {
            let Some(key) = ["anyOf", "oneOf"].into_iter().find(|k| m.contains_key(*k)) else {
                return Some(());
            };
            let Some(Value::Array(branches)) = m.remove(key) else {
                continue;
            };
            let branch = self.rng.pick(&branches)?;
            let picked = self.flatten(branch, 0)?;
            merge(m, picked);
        }
        Some(())
    }

    /// A value for `schema` at nesting `depth`; `None` when the generator
    /// cannot build one.
    pub(super) fn value(&mut self, schema: &Value, depth: usize) -> Option<Gen> {
        if depth > DEPTH_CAP {
            return None;
        }
        let mut m = self.flatten(schema, 0)?;
        self.choose_branches(&mut m)?;
        if let Some(c) = m.get("const") {
            return Some(Gen::from_value(c));
        }
        if let Some(Value::Array(options)) = m.get("enum") {
            return self.rng.pick(options).map(Gen::from_value);
        }
        let mut kinds = allowed_kinds(&m);
        if depth >= self.fuzz.max_depth && kinds.iter().any(|k| k.is_scalar()) {
            kinds.retain(|k| k.is_scalar());
        }
        match *self.rng.pick(&kinds)? {
            Kind::Null => Some(Gen::Null),
            Kind::Boolean => Some(Gen::Bool(self.rng.chance(1, 2))),
            Kind::Integer => Some(self.integer(&m)),
            Kind::Number => Some(self.number(&m)),
            Kind::String => Some(self.string(&m)),
            Kind::Array => self.array(&m, depth),
            Kind::Object => self.object(&m, depth),
        }
    }

    /// A value of any type.
    pub(super) fn any(&mut self, depth: usize) -> Option<Gen> {
        self.value(&Value::Bool(true), depth)
    }

    /// A value for an extra property: from the `additionalProperties`
    /// schema, or of any type.
    pub(super) fn extra_value(&mut self, schema: Option<&Value>, depth: usize) -> Option<Gen> {
        match schema {
            Some(s) => self.value(s, depth + 1),
            None => self.any(depth + 1),
        }
    }

    pub(super) fn extra_key(&mut self, taken: impl Fn(&str) -> bool) -> String {
        const STEMS: &[&str] = &["extra", "x", "note", "_meta", "ключ", "a b", ""];
        for n in 0u32.. {
            let stem = self.rng.pick(STEMS).copied().unwrap_or("extra");
            let key = if n == 0 {
                stem.to_owned()
            } else {
                format!("{stem}{n}")
            };
            if !taken(&key) {
                return key;
            }
        }
        String::new()
    }

    pub(super) fn object(&mut self, m: &Map<String, Value>, depth: usize) -> Option<Gen> {
        let props = m.get("properties").and_then(Value::as_object);
        let required = strings(m.get("required"));
        let extra_schema = m.get("additionalProperties");
        let shallow = depth >= self.fuzz.max_depth;
        let mut members: Vec<(String, Gen)> = Vec::new();
        for (key, sub) in props.into_iter().flatten() {
            let needed = required.contains(key);
            if !needed && (shallow || self.rng.chance(1, 2)) {
                continue;
            }
            match self.value(sub, depth + 1) {
                Some(v) => members.push((key.clone(), v)),
                None if needed => return None,
                None => {}
            }
        }
        for key in &required {
            let declared = props.is_some_and(|p| p.contains_key(key));
            if !declared && !members.iter().any(|(k, _)| k == key) {
                let v = self.extra_value(extra_schema, depth)?;
                members.push((key.clone(), v));
            }
        }
        self.object_extras(m, props, &mut members, depth)?;
        if let Some(max) = usize_kw(m, "maxProperties") {
            while members.len() > max {
                let Some(at) = members.iter().rposition(|(k, _)| !required.contains(k)) else {
                    break;
                };
                members.remove(at);
            }
        }
        Some(Gen::Obj(members))
    }

    /// Adds undeclared properties: sometimes one when allowed, and as many
    /// as `minProperties` asks. Names come from `patternProperties` when it
    /// has patterns (always, when other names are closed off).
    pub(super) fn object_extras(
        &mut self,
        m: &Map<String, Value>,
        props: Option<&Map<String, Value>>,
        members: &mut Vec<(String, Gen)>,
        depth: usize,
    ) -> Option<()> {
        let extra_schema = m.get("additionalProperties");
        let closed = matches!(extra_schema, Some(Value::Bool(false)));
        let patterns: Vec<(&String, &Value)> = m
            .get("patternProperties")
            .and_then(Value::as_object)
            .map(|p| p.iter().collect())
            .unwrap_or_default();
        let open = !closed || !patterns.is_empty();
        let mut wanted = usize::from(open && depth < self.fuzz.max_depth && self.rng.chance(1, 4));
        let min = usize_kw(m, "minProperties").unwrap_or(0);
        wanted = wanted.max(min.saturating_sub(members.len())).min(64);
        for _ in 0..wanted {
            let taken = |k: &str| {
                props.is_some_and(|p| p.contains_key(k)) || members.iter().any(|(m, _)| m == k)
            };
            let patterned = if !patterns.is_empty() && (closed || self.rng.chance(1, 2)) {
                self.patterned_key(&patterns, taken)
            } else {
                None
            };
            let (key, schema) = match patterned {
                Some((key, schema)) => (key, Some(schema)),
                None => (self.extra_key(taken), extra_schema),
            };
            let value = self.extra_value(schema, depth)?;
            members.push((key, value));
        }
        Some(())
    }

    /// A free name matching one of the `patternProperties` patterns, with
    /// that pattern's schema.
    pub(super) fn patterned_key<'s>(
        &mut self,
        patterns: &[(&String, &'s Value)],
        taken: impl Fn(&str) -> bool,
    ) -> Option<(String, &'s Value)> {
        let (pattern, schema) = *self.rng.pick(patterns)?;
        let parsed = pattern::parse(pattern)?;
        (0..8)
            .filter_map(|_| pattern::generate(&parsed, &mut self.rng))
            .find(|key| !taken(key))
            .map(|key| (key, schema))
    }

    pub(super) fn array(&mut self, m: &Map<String, Value>, depth: usize) -> Option<Gen> {
        let (prefix, rest) = item_schemas(m);
        let min = usize_kw(m, "minItems").unwrap_or(0);
        let max = usize_kw(m, "maxItems").unwrap_or(usize::MAX);
        let mut hi = if depth >= self.fuzz.max_depth {
            min
        } else {
            min.max(self.fuzz.max_items)
        };
        hi = hi.min(max);
        if matches!(rest, Some(Value::Bool(false))) {
            hi = hi.min(prefix.len());
        }
        let len = self.rng.size(min, hi.max(min));
        let unique = m.get("uniqueItems") == Some(&Value::Bool(true));
        let mut items: Vec<Gen> = Vec::with_capacity(len);
        let mut seen = BTreeSet::new();
        for i in 0..len {
            let schema = prefix.get(i).copied().or(rest);
            let Some(item) = self.unique_item(schema, depth, unique, &mut seen) else {
                if items.len() >= min {
                    break;
                }
                return None;
            };
            items.push(item);
        }
        if let Some(contains) = m.get("contains")
            && let Some(item) = self.value(contains, depth + 1)
        {
            let at = self.rng.size(0, items.len());
            if items.len() < hi.max(1) {
                items.insert(at, item);
            } else if let Some(slot) = items.get_mut(at) {
                *slot = item;
            }
        }
        Some(Gen::Arr(items))
    }

    /// An item, differing from those in `seen` when `unique` (a few tries).
    pub(super) fn unique_item(
        &mut self,
        schema: Option<&Value>,
        depth: usize,
        unique: bool,
        seen: &mut BTreeSet<String>,
    ) -> Option<Gen> {
        for _ in 0..8 {
            let item = match schema {
                Some(s) => self.value(s, depth + 1),
                None => self.any(depth + 1),
            }?;
            if !unique || seen.insert(item.text()) {
                return Some(item);
            }
        }
        None
    }

    pub(super) fn string(&mut self, m: &Map<String, Value>) -> Gen {
        let min = usize_kw(m, "minLength").unwrap_or(0);
        let max = usize_kw(m, "maxLength");
        let fits = |s: &str| {
            let n = s.chars().count();
            n >= min && max.is_none_or(|mx| n <= mx)
        };
        if let Some(p) = m.get("pattern").and_then(Value::as_str) {
            if let Some(re) = pattern::parse(p) {
                for _ in 0..16 {
                    if let Some(s) = pattern::generate(&re, &mut self.rng)
                        && fits(&s)
                    {
                        return Gen::Str(s);
                    }
                }
            }
            // A pattern beyond the subset, or lengths it misses: random
            // strings, left to the check.
        } else if let Some(format) = m.get("format").and_then(Value::as_str)
            && let Some(s) = self.formatted(format)
            && fits(&s)
        {
            return Gen::Str(s);
        }
        Gen::Str(self.random_string(min, max))
    }

    pub(super) fn random_string(&mut self, min: usize, max: Option<usize>) -> String {
        let hi = max.unwrap_or(usize::MAX).min(min.max(self.fuzz.max_length));
        let len = self.rng.size(min, hi.max(min));
        (0..len).map(|_| self.random_char()).collect()
    }

    pub(super) fn random_char(&mut self) -> char {
        let roll = self.rng.below(100);
        let from = |rng: &mut Rng, set: &[char]| rng.pick(set).copied().unwrap_or('a');
        match roll {
            0..70 => self.ascii(ALNUM),
            70..80 => from(&mut self.rng, PUNCT),
            80..88 => from(&mut self.rng, TRICKY),
            _ => from(&mut self.rng, WIDE),
        }
    }

    pub(super) fn ascii(&mut self, set: &[u8]) -> char {
        self.rng.pick(set).map_or('a', |b| char::from(*b))
    }

    pub(super) fn digits(&mut self, n: usize) -> String {
        (0..n).map(|_| self.ascii(DIGITS)).collect()
    }

    pub(super) fn word(&mut self) -> &'static str {
        self.rng.pick(WORDS).copied().unwrap_or("main")
    }

    pub(super) fn num(&mut self, lo: i128, hi: i128) -> i128 {
        self.rng.between(lo, hi)
    }

    /// A plausible value of a `format`, if it is one the generator knows.
    pub(super) fn formatted(&mut self, format: &str) -> Option<String> {
        let s = match format {
            "date-time" => format!("{}T{}", self.date(), self.time()),
            "date" => self.date(),
            "time" => self.time(),
            "email" | "idn-email" => {
                format!("{}{}@example.{}", self.word(), self.num(1, 99), self.tld())
            }
            "uri" | "iri" | "uri-reference" | "iri-reference" | "url" => format!(
                "https://example.{}/{}/{}?page={}",
                self.tld(),
                self.word(),
                self.word(),
                self.num(1, 9)
            ),
            "uuid" => {
                let hex = |g: &mut Self, n: usize| -> String {
                    (0..n).map(|_| g.ascii(b"0123456789abcdef")).collect()
                };
                let parts = [
                    hex(self, 8),
                    hex(self, 4),
                    hex(self, 4),
                    hex(self, 4),
                    hex(self, 12),
                ];
                parts.join("-")
            }
            "ipv4" => format!(
                "{}.{}.{}.{}",
                self.num(1, 223),
                self.num(0, 255),
                self.num(0, 255),
                self.num(1, 254)
            ),
            "ipv6" => format!("2001:db8::{:x}", self.num(1, 0xffff)),
            "hostname" | "idn-hostname" => {
                format!("{}{}.example.com", self.word(), self.num(1, 99))
            }
            "duration" => format!("P{}DT{}H", self.num(0, 30), self.num(0, 23)),
            _ => return None,
        };
        Some(s)
    }

    pub(super) fn tld(&mut self) -> &'static str {
        self.rng
            .pick(&["com", "org", "net"])
            .copied()
            .unwrap_or("com")
    }

    pub(super) fn date(&mut self) -> String {
        format!(
            "{:04}-{:02}-{:02}",
            self.num(1990, 2040),
            self.num(1, 12),
            self.num(1, 28)
        )
    }

    pub(super) fn time(&mut self) -> String {
        let fraction = if self.rng.chance(1, 3) {
            format!(".{}", self.digits(3))
        } else {
            String::new()
        };
        let zone = if self.rng.chance(1, 2) {
            "Z".to_owned()
        } else {
            format!("+{:02}:00", self.num(0, 12))
        };
        format!(
            "{:02}:{:02}:{:02}{fraction}{zone}",
            self.num(0, 23),
            self.num(0, 59),
            self.num(0, 59)
        )
    }

    /// Half-width of the range drawn from when a bound is missing.
    pub(super) fn span(&mut self) -> f64 {
        match self.rng.below(10) {
            0..7 => 100.0,
            7..9 => 1e6,
            _ => 1e12,
        }
    }

    pub(super) fn integer(&mut self, m: &Map<String, Value>) -> Gen {
        let bounds = Bounds::of(m);
        let span = self.span();
        if let Some(step) = Decimal::of(m) {
            // The least integer multiple of `mantissa / 10^scale`.
            let unit = step.mantissa / gcd(step.mantissa, 10i128.pow(step.scale));
            return Gen::Num(self.multiple(&bounds, unit, 0, span));
        }
        let (lo, hi) = bounds.scaled(0, span);
        Gen::Num(self.num(lo, hi).to_string())
    }

    pub(super) fn number(&mut self, m: &Map<String, Value>) -> Gen {
        let bounds = Bounds::of(m);
        let span = self.span();
        if let Some(step) = Decimal::of(m) {
            return Gen::Num(self.multiple(&bounds, step.mantissa, step.scale, span));
        }
        let unbounded = bounds.lo.is_none() && bounds.hi.is_none();
        match self.rng.below(8) {
            0..4 => self.integer(m),
            4 if unbounded => {
                let e = if self.rng.chance(1, 2) { "e" } else { "E" };
                let (m, x) = (self.num(-99, 99), self.num(-5, 5));
                Gen::Num(format!("{m}{e}{x}"))
            }
            _ => {
                let scale = u32::try_from(self.num(1, 3)).unwrap_or(1);
                let (lo, hi) = bounds.scaled(scale, span);
                Gen::Num(decimal_text(self.num(lo, hi), scale))
            }
        }
    }

    /// `k * mantissa / 10^scale` inside the bounds.
    pub(super) fn multiple(
        &mut self,
        bounds: &Bounds,
        mantissa: i128,
        scale: u32,
        span: f64,
    ) -> String {
        // Without bounds, draw about `span` steps either side of zero.
        let step = mantissa as f64 / 10f64.powi(i32::try_from(scale).unwrap_or(0));
        let (lo, hi) = bounds.scaled(scale, span * step);
        let (k_lo, k_hi) = (div_ceil(lo, mantissa), div_floor(hi, mantissa));
        let k = self.num(k_lo, k_hi);
        decimal_text(k.saturating_mul(mantissa), scale)
    }
}

/// The item schemas of an array schema: the positional ones, then the
/// schema of the rest (`None`: any value).
pub(super) fn item_schemas(m: &Map<String, Value>) -> (Vec<&Value>, Option<&Value>) {
    match (m.get("prefixItems"), m.get("items")) {
        (Some(Value::Array(prefix)), rest) => (prefix.iter().collect(), rest),
        (_, Some(Value::Array(prefix))) => (prefix.iter().collect(), m.get("additionalItems")),
        (_, rest) => (Vec::new(), rest),
    }
}

/// One step of a path into a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Seg {
    Key(String),
    Index(usize),
}

/// A JSON Pointer (RFC 6901) for a path.
pub(super) fn pointer(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        out.push('/');
        match seg {
            Seg::Key(k) => out.push_str(&k.replace('~', "~0").replace('/', "~1")),
            Seg::Index(i) => out.push_str(&i.to_string()),
        }
    }
    out
}
