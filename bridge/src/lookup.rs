//! The lookup diagnostic: the questions a debug library asks (symbol
//! addresses, type sizes, field offsets, strings, memory), asked of a
//! [`Target`] and answered the way mpiq answers them, to compare with what
//! the debugger says. One grammar ([`LOOKUP_OPTIONS`], the same kind of
//! table as the dump options) and one output for every front end: the CLI's
//! `mpiq lookup --pid PID ...` and lldb's `mpi lookup ...`.
//!
//! The output is one line per answer, `KIND NAME VALUE` (`-` when there is
//! none; strings quoted), the kinds in the order of [`Kind::ALL`], each in
//! the order asked; or, with `--json`, one object by kind, then name.

use std::sync::LazyLock;

use serde_json::{Map, Value as Json};

use crate::dll::discover;
use crate::options::{
    options_help, parse_with, split_words, wrap_usage, Handler, OptionSpec, UsageError, ARGUMENTS_PREFIX,
};
use crate::target::question::{self, Answer as Reply};
use crate::target::{ByteOrder, Target, TargetError, TypeId};

/// The most bytes one `--read` reads.
pub const MAX_READ: usize = 1 << 20;

/// What is asked: a question a debug library asks ([`Ask`](Question::Ask),
/// the bridge's one [`question::Question`] type, its types named), or one
/// only this diagnostic asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Question {
    /// A debug library's question: a symbol's or a function's address, a
    /// type's size (`Size` or `Type`), a field's offset, memory, the basic
    /// type sizes.
    Ask(question::Question<String>),
    /// The C string a data symbol holds.
    String(String),
    /// The process: pid, executable, world rank.
    Process,
}

impl Question {
    /// `--symbol NAME`.
    pub fn symbol(name: &str) -> Question {
        Question::Ask(question::Question::Symbol(name.into()))
    }

    /// `--function NAME`.
    pub fn function(name: &str) -> Question {
        Question::Ask(question::Question::Function(name.into()))
    }

    /// `--sizeof TYPE`.
    pub fn size_of(ty: &str) -> Question {
        Question::Ask(question::Question::Size(ty.into()))
    }

    /// `--offsetof TYPE.FIELD`.
    pub fn offset_of(ty: &str, field: &str) -> Question {
        Question::Ask(question::Question::Field {
            ty: ty.into(),
            field: field.into(),
        })
    }

    /// `--read ADDR:LEN`.
    pub fn read(addr: u64, len: usize) -> Question {
        Question::Ask(question::Question::Read { addr, len: len as u64 })
    }

    /// `--sizes`.
    pub fn sizes() -> Question {
        Question::Ask(question::Question::TypeSizes)
    }

    /// Its kind.
    pub fn kind(&self) -> Kind {
        use question::Question as Q;
        match self {
            Question::Ask(Q::Symbol(_)) => Kind::Symbol,
            Question::Ask(Q::Function(_)) => Kind::Function,
            Question::Ask(Q::Type(_) | Q::Size(_)) => Kind::Sizeof,
            Question::Ask(Q::Field { .. }) => Kind::Offsetof,
            Question::Ask(Q::Read { .. }) => Kind::Read,
            Question::Ask(Q::TypeSizes) => Kind::Sizes,
            Question::String(_) => Kind::String,
            Question::Process => Kind::Process,
        }
    }
}

/// The kinds of answers, in the order they are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// `symbol NAME 0xADDR`
    Symbol,
    /// `function NAME 0xADDR`
    Function,
    /// `string NAME "TEXT"`
    String,
    /// `sizeof TYPE N`
    Sizeof,
    /// `offsetof TYPE.FIELD N`
    Offsetof,
    /// `read 0xADDR HEX` (16 bytes a line)
    Read,
    /// `sizes short 2`, ..., `sizes byte_order little`
    Sizes,
    /// `process pid N`, `process executable "PATH"`, `process world_rank N`
    Process,
}

impl Kind {
    /// Every kind, in the order answers are printed.
    pub const ALL: [Kind; 8] = [
        Kind::Symbol,
        Kind::Function,
        Kind::String,
        Kind::Sizeof,
        Kind::Offsetof,
        Kind::Read,
        Kind::Sizes,
        Kind::Process,
    ];

    /// Its word, the first of each line (and its option's name).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Symbol => "symbol",
            Kind::Function => "function",
            Kind::String => "string",
            Kind::Sizeof => "sizeof",
            Kind::Offsetof => "offsetof",
            Kind::Read => "read",
            Kind::Sizes => "sizes",
            Kind::Process => "process",
        }
    }
}

/// A parsed lookup command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lookup {
    /// The questions, in the order given.
    pub questions: Vec<Question>,
    /// Print the answers as JSON.
    pub json: bool,
    /// `--targets` as given, for a debugger front end to pick its target.
    pub targets: Option<String>,
}

/// A row of [`LOOKUP_OPTIONS`] that asks a question, made by `make` from
/// the option's value. Those with a value may be repeated; `--sizes` and
/// `--process` ask once however often they are given.
macro_rules! question {
    ($name:literal, $value:expr, $help:literal, $make:expr) => {
        OptionSpec {
            name: $name,
            aliases: &[],
            value: $value,
            help: $help,
            repeatable: $value.is_some(),
            handler: Handler::Bridge,
            apply: |l: &mut Lookup, v: &str| {
                let make: fn(&str) -> Result<Question, UsageError> = $make;
                let q = make(v)?;
                if $value.is_some() || !l.questions.contains(&q) {
                    l.questions.push(q);
                }
                Ok(())
            },
        }
    };
}

/// The lookup command's options, in the order the help lists them.
pub const LOOKUP_OPTIONS: &[OptionSpec<Lookup>] = &[
    question!("symbol", Some("NAME"), "runtime address of a data symbol", |v| {
        Ok(Question::symbol(v))
    }),
    question!("function", Some("NAME"), "runtime address of a function", |v| {
        Ok(Question::function(v))
    }),
    question!(
        "string",
        Some("NAME"),
        "the C string a char[] or char * data symbol holds",
        |v| Ok(Question::String(v.into()))
    ),
    question!(
        "sizeof",
        Some("TYPE"),
        "the size of a type: X, struct X, union X or a typedef",
        |v| Ok(Question::size_of(v))
    ),
    question!(
        "offsetof",
        Some("TYPE.FIELD"),
        "offset of a field of a struct or union",
        |v| match v.rsplit_once('.') {
            Some((t, f)) if !t.is_empty() && !f.is_empty() => Ok(Question::offset_of(t, f)),
            _ => Err(UsageError(format!("--offsetof {v}: expected TYPE.FIELD"))),
        }
    ),
    question!(
        "read",
        Some("ADDR:LEN"),
        "LEN bytes of memory at ADDR (numbers decimal or 0x hex; at most 1 MiB), in hex, 16 to a line",
        parse_read
    ),
    question!(
        "sizes",
        None::<&str>,
        "the sizes of short, int, long, long long and pointers, and the byte order",
        |_| Ok(Question::sizes())
    ),
    question!(
        "process",
        None::<&str>,
        "the process: pid, executable, world rank",
        |_| { Ok(Question::Process) }
    ),
    OptionSpec::switch(
        "json",
        "print the answers as one JSON object, by kind, then name",
        |l, _| {
            l.json = true;
            Ok(())
        },
    ),
    OptionSpec::targets(|l, v| {
        l.targets = Some(v.to_string());
        Ok(())
    }),
];

fn parse_read(v: &str) -> Result<Question, UsageError> {
    let bad = || UsageError(format!("--read {v}: expected ADDR:LEN, numbers decimal or 0x hex"));
    let (addr, len) = v.split_once(':').ok_or_else(bad)?;
    let addr = parse_number(addr).ok_or_else(bad)?;
    let len = parse_number(len)
        .and_then(|l| usize::try_from(l).ok())
        .ok_or_else(bad)?;
    if len > MAX_READ {
        return Err(UsageError(format!("--read {v}: at most {MAX_READ} bytes (1 MiB)")));
    }
    Ok(Question::read(addr, len))
}

/// A number in decimal or `0x` hex.
pub fn parse_number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

impl Lookup {
    /// Parses already split arguments (the options of [`LOOKUP_OPTIONS`]).
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<Self, UsageError> {
        parse_with(LOOKUP_OPTIONS, args)
    }

    /// Parses a command line as a debugger passes it.
    pub fn parse_line(line: &str) -> Result<Self, UsageError> {
        Self::parse(&split_words(line)?)
    }
}

/// What the lookup command does, between its usage line and its options.
pub const DESCRIPTION: &str = "\
Diagnostic: ask the target the questions an MPI debug library asks, answered
the way mpiq answers them, to compare with the debugger (`print &NAME`,
`print sizeof(TYPE)`, `print &((TYPE *) 0)->FIELD`). Prints one line per
answer, KIND NAME VALUE (VALUE - when there is none, strings quoted), the
kinds in the order below, each in the order asked.
";

/// Help text of the lookup command: the usage line (a paragraph starting
/// with [`ARGUMENTS_PREFIX`]), [`DESCRIPTION`], one line per option.
pub static HELP: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{}\n\n{DESCRIPTION}\nOptions:\n{}",
        wrap_usage(ARGUMENTS_PREFIX, LOOKUP_OPTIONS),
        options_help(LOOKUP_OPTIONS)
    )
});

/// An answer's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// None: no such symbol, type or field (`-`, JSON `null`).
    Missing,
    /// An address (`0x...`; JSON: that string).
    Address(u64),
    /// A number.
    Number(u64),
    /// A text, quoted.
    Text(String),
    /// A word, as it is.
    Word(String),
    /// Bytes, in hex.
    Bytes(Vec<u8>),
    /// A type that was found: its handle and its size (`None`: incomplete,
    /// printed as `-`).
    Type {
        /// The front end's handle.
        id: TypeId,
        /// `sizeof`.
        size: Option<u64>,
    },
}

impl Value {
    fn text(&self) -> String {
        match self {
            Value::Missing | Value::Type { size: None, .. } => "-".into(),
            Value::Address(a) => format!("{a:#x}"),
            Value::Number(n) | Value::Type { size: Some(n), .. } => n.to_string(),
            Value::Text(t) => format!("{t:?}"),
            Value::Word(w) => w.clone(),
            Value::Bytes(b) => hex(b),
        }
    }

    fn json(&self) -> Json {
        match self {
            Value::Missing | Value::Type { size: None, .. } => Json::Null,
            Value::Address(a) => Json::String(format!("{a:#x}")),
            Value::Number(n) | Value::Type { size: Some(n), .. } => (*n).into(),
            Value::Text(t) | Value::Word(t) => Json::String(t.clone()),
            Value::Bytes(b) => Json::String(hex(b)),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One answer: `KIND NAME VALUE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// What was asked.
    pub kind: Kind,
    /// Of what: the symbol, the type, `TYPE.FIELD`, the address of a line
    /// of memory, the basic type or the property of the process.
    pub name: String,
    /// The answer.
    pub value: Value,
}

/// A [`Target`] asked by the lookup command. `dyn Target` is one (its
/// strings read as [`read_string_symbol`] reads them); a front end that
/// can tell a `char[]` symbol from a `char *` one implements it itself.
pub trait LookupTarget: Target {
    /// The C string the data symbol `name` holds (`None`: no such symbol).
    fn string_symbol(&mut self, name: &str) -> Result<Option<String>, TargetError>;

    /// Itself as a [`Target`], to ask it a [`question::Question`].
    fn as_target(&mut self) -> &mut dyn Target;
}

impl LookupTarget for dyn Target + '_ {
    fn string_symbol(&mut self, name: &str) -> Result<Option<String>, TargetError> {
        read_string_symbol(self, name)
    }

    fn as_target(&mut self) -> &mut dyn Target {
        self
    }
}

/// The C string a data symbol holds, read as discovery reads
/// `MPIR_dll_name`: the characters at the symbol if they make a string,
/// else the string a pointer there points to.
pub fn read_string_symbol(t: &mut dyn Target, name: &str) -> Result<Option<String>, TargetError> {
    let Some(addr) = t.find_symbol(name)? else {
        return Ok(None);
    };
    let mut words = crate::target::read::Words::new(t)?;
    discover::read_name_variable(&mut words, addr).map(Some)
}

/// Asks a debug library's question, its type found by name first: what
/// the debug library would be told. `Ok(None)`: no such type.
fn ask(
    target: &mut dyn Target,
    q: &question::Question<String>,
) -> Result<Option<(question::Question, Reply)>, TargetError> {
    let Some(q) = q.clone().with_types(|name| target.find_type(&name))? else {
        return Ok(None);
    };
    let reply = q.ask(target)?;
    Ok(Some((q, reply)))
}

/// The name an answer is printed under.
fn name_of(q: &question::Question<String>) -> String {
    use question::Question as Q;
    match q {
        Q::Symbol(n) | Q::Function(n) | Q::Type(n) | Q::Size(n) => n.clone(),
        Q::Field { ty, field } => format!("{ty}.{field}"),
        Q::Read { addr, .. } => format!("{addr:#x}"),
        Q::TypeSizes => String::new(),
    }
}

/// Asks every question; the answers come by kind ([`Kind::ALL`]), each
/// kind's in the order asked. A missing symbol, type or field, or memory
/// that cannot be read, is an answer ([`Value::Missing`]); another failure
/// of the host ends it.
pub fn answer<T: LookupTarget + ?Sized>(target: &mut T, lookup: &Lookup) -> Result<Vec<Answer>, TargetError> {
    use question::Question as Q;
    let mut out = Vec::new();
    let mut put = |kind: Kind, name: &str, value: Value| {
        out.push(Answer {
            kind,
            name: name.to_string(),
            value,
        })
    };
    let number = |n: Option<u64>| n.map_or(Value::Missing, Value::Number);
    for kind in Kind::ALL {
        for q in lookup.questions.iter().filter(|q| q.kind() == kind) {
            let asked = match q {
                Question::String(s) => {
                    let text = match target.string_symbol(s) {
                        // No string there (unreadable, or no NUL within
                        // the limit) is an answer too.
                        Err(TargetError::Unreadable { .. }) => None,
                        other => other?,
                    };
                    put(kind, s, text.map_or(Value::Missing, Value::Text));
                    continue;
                }
                Question::Process => {
                    let d = target.describe();
                    put(kind, "pid", number(d.pid.map(u64::from)));
                    put(kind, "executable", Value::Text(d.executable));
                    let rank = target.world_rank().and_then(|r| u64::try_from(r).ok());
                    put(kind, "world_rank", number(rank));
                    continue;
                }
                Question::Ask(asked) => asked,
            };
            let name = name_of(asked);
            let reply = match ask(target.as_target(), asked) {
                // Memory that is not there is an answer too.
                Err(TargetError::Unreadable { .. }) => None,
                other => other?,
            };
            match (reply, asked) {
                (None, Q::TypeSizes) => {}
                (None, _) => put(kind, &name, Value::Missing),
                (Some((_, Reply::Bytes(bytes))), &Q::Read { addr, .. }) => {
                    for (i, chunk) in bytes.chunks(16).enumerate() {
                        put(
                            kind,
                            &format!("{:#x}", addr + 16 * i as u64),
                            Value::Bytes(chunk.to_vec()),
                        );
                    }
                }
                (Some((Q::Size(id), reply)), _) => {
                    let size = reply.value()?;
                    put(kind, &name, Value::Type { id, size });
                }
                (Some((Q::Symbol(_) | Q::Function(_), reply)), _) => {
                    put(kind, &name, reply.value()?.map_or(Value::Missing, Value::Address))
                }
                (Some((Q::TypeSizes, reply)), _) => {
                    let s = reply.sizes()?;
                    for (name, size) in [
                        ("short", s.short),
                        ("int", s.int),
                        ("long", s.long),
                        ("long_long", s.long_long),
                        ("pointer", s.pointer),
                    ] {
                        put(kind, name, number(u64::try_from(size).ok()));
                    }
                    let order = match target.byte_order() {
                        ByteOrder::Little => "little",
                        ByteOrder::Big => "big",
                    };
                    put(kind, "byte_order", Value::Word(order.into()));
                }
                (Some((_, reply)), _) => put(kind, &name, number(reply.value()?)),
            }
        }
    }
    Ok(out)
}

/// The answers as lines `KIND NAME VALUE`, or as one JSON object (by
/// kind, then name).
pub fn render(answers: &[Answer], json: bool) -> String {
    if json {
        let mut obj = Map::new();
        for a in answers {
            if let Json::Object(m) = obj.entry(a.kind.as_str()).or_insert_with(|| Json::Object(Map::new())) {
                m.insert(a.name.clone(), a.value.json());
            }
        }
        return Json::Object(obj).to_string() + "\n";
    }
    answers
        .iter()
        .map(|a| format!("{} {} {}\n", a.kind.as_str(), a.name, a.value.text()))
        .collect()
}

/// Asks and prints: [`answer`], then [`render`].
pub fn run<T: LookupTarget + ?Sized>(target: &mut T, lookup: &Lookup) -> Result<String, TargetError> {
    Ok(render(&answer(target, lookup)?, lookup.json))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::{ProcessDescription, TypeSizes};

    /// A process with one string, one pointer to a string, one type.
    struct Fake {
        memory: Vec<u8>,
    }

    const BASE: u64 = 0x1000;

    impl Fake {
        fn new() -> Fake {
            let mut memory = vec![0u8; 256];
            memory[..12].copy_from_slice(b"fixture-lib\0");
            memory[32..40].copy_from_slice(&(BASE + 64).to_le_bytes());
            memory[64..79].copy_from_slice(b"pointer-string\0");
            // No NUL from here to the end of memory.
            memory[128..].fill(b'x');
            Fake { memory }
        }
    }

    impl Target for Fake {
        fn describe(&self) -> ProcessDescription {
            ProcessDescription {
                pid: Some(42),
                executable: "/bin/ring".into(),
            }
        }
        fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
            let start = addr.checked_sub(BASE).map(|s| s as usize);
            match start.and_then(|s| self.memory.get(s..s + buf.len())) {
                Some(bytes) => {
                    buf.copy_from_slice(bytes);
                    Ok(())
                }
                None => Err(TargetError::Unreadable {
                    addr,
                    len: buf.len() as u64,
                    reason: "not mapped".into(),
                }),
            }
        }
        fn find_symbol(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
            Ok(match name {
                "fx_name" => Some(BASE),
                "fx_name_ptr" => Some(BASE + 32),
                "fx_unterminated" => Some(BASE + 128),
                _ => None,
            })
        }
        fn find_function(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
            Ok((name == "main").then_some(0x400000))
        }
        fn find_type(&mut self, name: &str) -> Result<Option<TypeId>, TargetError> {
            Ok(match name {
                "fx_node_t" => Some(TypeId(1)),
                "struct opaque" => Some(TypeId(2)),
                _ => None,
            })
        }
        fn field_offset(&mut self, ty: TypeId, field: &str) -> Result<Option<u64>, TargetError> {
            Ok((ty == TypeId(1) && field == "next").then_some(24))
        }
        fn size_of(&mut self, ty: TypeId) -> Result<Option<u64>, TargetError> {
            Ok((ty == TypeId(1)).then_some(104))
        }
        fn type_sizes(&mut self) -> Result<TypeSizes, TargetError> {
            Ok(TypeSizes::LP64)
        }
        fn byte_order(&mut self) -> ByteOrder {
            ByteOrder::Little
        }
    }

    fn ask(line: &str) -> Result<String, TargetError> {
        let lookup = Lookup::parse_line(line).unwrap();
        let mut fake = Fake::new();
        run(&mut fake as &mut dyn Target, &lookup)
    }

    #[test]
    fn answers_come_by_kind_one_line_each() {
        let out = ask(
            "--string fx_name --string fx_name_ptr --sizeof fx_node_t --offsetof fx_node_t.next --symbol nope \
             --function main --sizeof 'struct opaque' --offsetof fx_node_t.prev",
        )
        .unwrap();
        assert_eq!(
            out,
            "symbol nope -\nfunction main 0x400000\nstring fx_name \"fixture-lib\"\n\
             string fx_name_ptr \"pointer-string\"\nsizeof fx_node_t 104\nsizeof struct opaque -\n\
             offsetof fx_node_t.next 24\noffsetof fx_node_t.prev -\n"
        );
    }

    #[test]
    fn memory_sizes_and_the_process() {
        let out = ask("--process --sizes --read 0x1000:20 --sizes").unwrap();
        assert_eq!(
            out,
            "read 0x1000 666978747572652d6c69620000000000\nread 0x1010 00000000\n\
             sizes short 2\nsizes int 4\nsizes long 8\nsizes long_long 8\nsizes pointer 8\n\
             sizes byte_order little\nprocess pid 42\nprocess executable \"/bin/ring\"\nprocess world_rank -\n"
        );
        assert_eq!(
            ask("--read 0:4 --read 0x1000:2").unwrap(),
            "read 0x0 -\nread 0x1000 6669\n"
        );
    }

    #[test]
    fn json_by_kind_then_name() {
        let out = ask("--json --symbol fx_name --symbol nope --sizeof fx_node_t --string fx_name").unwrap();
        let v: Json = serde_json::from_str(&out).unwrap();
        assert_eq!(v["symbol"]["fx_name"], "0x1000");
        assert_eq!(v["symbol"]["nope"], Json::Null);
        assert_eq!(v["sizeof"]["fx_node_t"], 104);
        assert_eq!(v["string"]["fx_name"], "fixture-lib");
        assert_eq!(ask("--json").unwrap(), "{}\n");
        // Not a string: unreadable past its end, no NUL.
        assert_eq!(ask("--string fx_unterminated").unwrap(), "string fx_unterminated -\n");
    }

    #[test]
    fn usage_errors() {
        for (line, says) in [
            ("--offsetof fx_node_t", "expected TYPE.FIELD"),
            ("--read 0x1000", "expected ADDR:LEN"),
            ("--read 0:2000000", "at most"),
            ("--symbol", "needs a value"),
            ("symbol x", "unknown argument 'symbol'"),
        ] {
            let e = Lookup::parse_line(line).unwrap_err();
            assert!(e.0.contains(says), "{line}: {e}");
        }
        let l = Lookup::parse_line("--target 2 --sizes").unwrap();
        assert_eq!(l.targets.as_deref(), Some("2"));
        assert_eq!(parse_number("0x10"), Some(16));
        assert_eq!(parse_number("10"), Some(10));
        assert_eq!(parse_number("zz"), None);
    }

    #[test]
    fn help_lists_every_question() {
        let help: &str = &HELP;
        for spec in LOOKUP_OPTIONS {
            assert!(
                help.contains(&format!("\n  {} ", spec.left())),
                "{}:\n{help}",
                spec.name
            );
        }
        for kind in Kind::ALL {
            assert!(LOOKUP_OPTIONS.iter().any(|s| s.name == kind.as_str()), "{kind:?}");
        }
    }
}
