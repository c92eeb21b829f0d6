//! `mpiq lookup`: the symbol and type questions a debug library asks,
//! answered the way mpiq answers them (for checking mpiq against gdb).

use mpiq::{Target, TargetError, UsageError};

use crate::process::Process;
use crate::run::RunError;

/// The questions of `mpiq lookup`.
pub struct Questions {
    /// Runtime addresses of data symbols.
    pub symbol: Vec<String>,
    /// Runtime addresses of functions.
    pub function: Vec<String>,
    /// C strings held by data symbols.
    pub string: Vec<String>,
    /// Sizes of types.
    pub sizeof: Vec<String>,
    /// Offsets of fields, `TYPE.FIELD`.
    pub offsetof: Vec<String>,
}

/// A target that can also read a string symbol.
pub trait LookupTarget: Target {
    /// The C string a `char *` or `char[]` data symbol holds.
    fn string_symbol(&mut self, name: &str) -> Result<Option<String>, TargetError>;
}

impl<M: crate::image::Memory> LookupTarget for Process<M> {
    fn string_symbol(&mut self, name: &str) -> Result<Option<String>, TargetError> {
        let Some((addr, size)) = self.image().find_symbol_sized(name) else {
            return Ok(None);
        };
        let ptr = self.image().type_sizes().pointer as u64;
        // `char name[N]` holds the text; `char *name` points to it.
        let at = if size == ptr { self.read_pointer(addr)? } else { addr };
        if at == 0 {
            return Ok(Some(String::new()));
        }
        self.read_c_string(at, 4096).map(Some)
    }
}

/// Answers every question, as lines `KIND NAME VALUE` or as JSON.
pub fn run_lookup(target: &mut dyn LookupTarget, questions: &Questions, json: bool) -> Result<String, RunError> {
    let mut lines = Vec::new();
    let mut obj = serde_json::Map::new();
    let mut put = |kind: &str, name: &str, value: Option<serde_json::Value>| {
        let text = match &value {
            None => "-".to_string(),
            Some(serde_json::Value::String(s)) if kind == "string" => format!("{s:?}"),
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
        };
        lines.push(format!("{kind} {name} {text}"));
        obj.entry(kind.to_string())
            .or_insert_with(|| serde_json::Value::Object(Default::default()))
            .as_object_mut()
            .map(|m| m.insert(name.to_string(), value.unwrap_or(serde_json::Value::Null)));
    };
    let hex = |a: u64| serde_json::Value::String(format!("{a:#x}"));
    for s in &questions.symbol {
        put("symbol", s, target.find_symbol(s).map_err(RunError::Lookup)?.map(hex));
    }
    for s in &questions.function {
        put(
            "function",
            s,
            target.find_function(s).map_err(RunError::Lookup)?.map(hex),
        );
    }
    for s in &questions.string {
        let v = target.string_symbol(s).map_err(RunError::Lookup)?;
        put("string", s, v.map(serde_json::Value::String));
    }
    for t in &questions.sizeof {
        let v = match target.find_type(t).map_err(RunError::Lookup)? {
            Some(id) => target.size_of(id).map_err(RunError::Lookup)?,
            None => None,
        };
        put("sizeof", t, v.map(Into::into));
    }
    for q in &questions.offsetof {
        let Some((t, f)) = q.rsplit_once('.') else {
            return Err(RunError::Usage(UsageError(format!(
                "--offsetof {q}: expected TYPE.FIELD"
            ))));
        };
        let v = match target.find_type(t).map_err(RunError::Lookup)? {
            Some(id) => target.field_offset(id, f).map_err(RunError::Lookup)?,
            None => None,
        };
        put("offsetof", q, v.map(Into::into));
    }
    if json {
        Ok(serde_json::Value::Object(obj).to_string() + "\n")
    } else {
        Ok(lines.join("\n") + "\n")
    }
}
