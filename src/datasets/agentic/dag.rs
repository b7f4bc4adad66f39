//! `dag_jsonl` (SPEC §1.3): one session per line, each a list of turns of literal OpenAI
//! messages, linked into trees by `spawns` (a fresh child conversation, joined by a later
//! turn or left in the background), `forks` (a child that continues the parent's history)
//! and `pre_session_spawns` (background children started with the session's turn 0).
//!
//! Read strictly, as AIPerf's loader reads it: a key it does not know is refused, and so are
//! a link to a session the file does not declare, a cycle, a FORK child with two parents, a
//! foreground fork before the last turn, a `join_at` outside the conversation and a `system`
//! message anywhere but the first turn of a conversation that starts its own history (a root
//! or a spawned child; a fork child continues its parent's). Every error is one line naming
//! the file and line (or the session) and the field. Sessions nobody links to are the roots;
//! each root becomes one tree whose streams are its sessions instantiated (a session spawned
//! twice is two streams), parents before children.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use super::streams::StreamKind;
use crate::datasets::DatasetError;

/// Streams one tree may expand to (a session spawned from several turns is copied each time).
pub const MAX_STREAMS: usize = 10_000;

/// One `dag_jsonl` file, every session checked.
#[derive(Debug, Clone, PartialEq)]
pub struct DagFile {
    pub path: PathBuf,
    /// In file order.
    pub sessions: Vec<Session>,
    /// The root sessions' trees, in file order.
    pub trees: Vec<DagTree>,
}

/// One line: a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub id: String,
    /// 1-based line of the file.
    pub line: usize,
    pub turns: Vec<Turn>,
}

/// One turn of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// Appended to the session's history when the turn is sent.
    pub messages: Vec<Map<String, Value>>,
    pub model: Option<String>,
    pub max_tokens: Option<u64>,
    pub tools: Option<Vec<Value>>,
    /// Merged into the request body.
    pub extra: Map<String, Value>,
    /// Milliseconds after the previous turn's response ended.
    pub delay_ms: f64,
}

/// Children that one turn of a stream starts together.
#[derive(Debug, Clone, PartialEq)]
pub struct Link {
    pub parent: u32,
    pub turn: u32,
    /// Started when the turn is sent (`pre_session_spawns`), not when its response ends.
    pub on_send: bool,
    /// The parent's turn that waits for them (`None`: background).
    pub join: Option<u32>,
    /// Fork children: each starts with a copy of the parent's history.
    pub fork: bool,
    pub children: Vec<u32>,
}

/// One session instantiated in a tree.
#[derive(Debug, Clone, PartialEq)]
pub struct DagStream {
    /// `root`, `root::spawn:w1`, `root::spawn:w1::fork:f`, ...
    pub id: String,
    /// Index into [`DagFile::sessions`].
    pub session: u32,
    pub kind: StreamKind,
    /// The root turn this stream descends from (the root: 0).
    pub root_turn: u32,
}

/// A root session and everything it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct DagTree {
    pub id: String,
    /// `streams[0]` is the root; a parent comes before its children.
    pub streams: Vec<DagStream>,
    pub links: Vec<Link>,
}

impl DagTree {
    /// Whether stream `s` continues its parent's history (a fork child).
    pub fn forked(&self, s: u32) -> bool {
        self.links.iter().any(|l| l.fork && l.children.contains(&s))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSession {
    session_id: String,
    turns: Vec<RawTurn>,
    #[serde(default)]
    pre_session_spawns: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTurn {
    messages: Vec<Map<String, Value>>,
    model: Option<String>,
    max_tokens: Option<u64>,
    tools: Option<Vec<Value>>,
    /// AIPerf's later loaders spell it `extra_body`.
    #[serde(alias = "extra_body")]
    extra: Option<Map<String, Value>>,
    #[serde(default)]
    delay: f64,
    #[serde(default)]
    forks: Vec<RawFork>,
    #[serde(default)]
    spawns: Vec<RawSpawn>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawFork {
    Bare(String),
    Full(ForkEntry),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ForkEntry {
    child: String,
    #[serde(default)]
    background: bool,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawSpawn {
    Bare(String),
    Group(SpawnEntry),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpawnEntry {
    children: Vec<String>,
    join_at: Option<i64>,
}

/// A session's links as read: per turn, its forks and spawn groups.
struct Links {
    pre: Vec<String>,
    /// Per turn: (child, background).
    forks: Vec<Vec<(String, bool)>>,
    /// Per turn: (children, join turn or background).
    spawns: Vec<Vec<(Vec<String>, Option<u32>)>>,
}

/// Whether the first line of a JSONL file is a `dag_jsonl` session.
pub fn is_dag(first: &Map<String, Value>) -> bool {
    first.contains_key("session_id") && first.contains_key("turns")
}

/// Reads and checks `text` (the file at `path`) and derives its trees.
pub fn read(path: &Path, text: &str) -> Result<DagFile, DatasetError> {
    let mut sessions: Vec<Session> = Vec::new();
    let mut links: Vec<Links> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_start_matches('\u{feff}');
        if line.trim().is_empty() {
            continue;
        }
        let at = |why: String| DatasetError::line(path, i + 1, why);
        let raw: RawSession = serde_json::from_str(line).map_err(|e| at(serde_why(line, &e)))?;
        let sid = raw.session_id.clone();
        let at_s = |why: String| at(format!("session {sid:?}: {why}"));
        if sid.is_empty() {
            return Err(at("`session_id` is empty".into()));
        }
        if let Some(&first) = index.get(&sid) {
            return Err(at_s(format!(
                "duplicate `session_id`, also line {}",
                sessions[first].line
            )));
        }
        if raw.turns.is_empty() {
            return Err(at_s(
                "`turns` is empty (a session has at least one turn)".into(),
            ));
        }
        let (session, l) = session(&raw, i + 1).map_err(at_s)?;
        index.insert(sid, sessions.len());
        sessions.push(session);
        links.push(l);
    }
    if sessions.is_empty() {
        return Err(DatasetError::file(path, "no session in this file"));
    }
    let graph = check_links(&sessions, &links, &index)
        .map_err(|(s, why)| DatasetError::line(path, sessions[s].line, why))?;
    let mut trees = Vec::new();
    for (s, _) in sessions
        .iter()
        .enumerate()
        .filter(|(s, _)| !graph.child[*s])
    {
        trees.push(
            expand(&sessions, &links, &index, s)
                .map_err(|why| DatasetError::line(path, sessions[s].line, why))?,
        );
    }
    if trees.is_empty() {
        return Err(DatasetError::file(
            path,
            "no root session: every session is linked from another one",
        ));
    }
    Ok(DagFile {
        path: path.to_path_buf(),
        sessions,
        trees,
    })
}

/// A serde error with the key it was read for (serde's own message names none for a wrong
/// value), without serde's position in the one-line object.
fn serde_why(line: &str, e: &serde_json::Error) -> String {
    let text = e.to_string();
    let text = text
        .rsplit_once(" at line ")
        .map_or(text.as_str(), |(head, _)| head)
        .to_string();
    let wrong_value = e.classify() == serde_json::error::Category::Data
        && (text.starts_with("invalid ") || text.starts_with("data did not match"));
    match wrong_value
        .then(|| super::format::key_before(line, e.line(), e.column()))
        .flatten()
    {
        Some(key) => format!("`{key}`: {text}"),
        None => text,
    }
}

/// One session's turns and links, each turn's fields checked.
fn session(raw: &RawSession, line: usize) -> Result<(Session, Links), String> {
    let n = raw.turns.len();
    let mut turns = Vec::with_capacity(n);
    let mut forks = Vec::with_capacity(n);
    let mut spawns = Vec::with_capacity(n);
    for (k, t) in raw.turns.iter().enumerate() {
        let at = |why: String| format!("turn {k}: {why}");
        if t.messages.is_empty() {
            return Err(at("`messages` is empty".into()));
        }
        for (m, msg) in t.messages.iter().enumerate() {
            if !msg.get("role").is_some_and(Value::is_string) {
                return Err(at(format!(
                    "`messages` {m}: no `role` string (an OpenAI chat message)"
                )));
            }
        }
        if t.max_tokens == Some(0) {
            return Err(at("`max_tokens` 0: must be at least 1".into()));
        }
        if !t.delay.is_finite() || t.delay < 0.0 {
            return Err(at(format!(
                "`delay` {}: must be a finite number of ms >= 0",
                t.delay
            )));
        }
        let extra = t.extra.clone().unwrap_or_default();
        if extra.contains_key("messages") {
            return Err(at(
                "`extra` sets `messages`, which the replay builds from the history".into(),
            ));
        }
        let mut fk: Vec<(String, bool)> = Vec::new();
        for f in &t.forks {
            let (child, background) = match f {
                RawFork::Bare(c) => (c.clone(), false),
                RawFork::Full(e) => (e.child.clone(), e.background),
            };
            if fk.iter().any(|(c, _)| *c == child) {
                return Err(at(format!("`forks`: {child:?} twice")));
            }
            if !background && k + 1 < n {
                return Err(at(format!(
                    "`forks`: a foreground fork ({child:?}) must be on the session's last \
                     turn (it ends the parent); use {{\"child\": {child:?}, \"background\": \
                     true}} to keep the parent going"
                )));
            }
            fk.push((child, background));
        }
        let mut groups: Vec<(Vec<String>, Option<u32>)> = Vec::new();
        let mut bare: Vec<String> = Vec::new();
        let next = |k: usize| (k + 1 < n).then_some(k as u32 + 1);
        for s in &t.spawns {
            match s {
                RawSpawn::Bare(c) => bare.push(c.clone()),
                RawSpawn::Group(g) => {
                    if !bare.is_empty() {
                        groups.push((std::mem::take(&mut bare), next(k)));
                    }
                    if g.children.is_empty() {
                        return Err(at("`spawns`: `children` is empty".into()));
                    }
                    let join = match g.join_at {
                        None => next(k),
                        Some(j) if j <= k as i64 || j >= n as i64 => {
                            return Err(at(format!(
                                "`spawns`: `join_at` {j} must be after the spawning turn and \
                                 before the session's end (turns 0..{n})"
                            )))
                        }
                        Some(j) => Some(j as u32),
                    };
                    groups.push((g.children.clone(), join));
                }
            }
        }
        if !bare.is_empty() {
            groups.push((bare, next(k)));
        }
        let mut seen: Vec<&String> = Vec::new();
        for c in groups.iter().flat_map(|(c, _)| c) {
            if seen.contains(&c) {
                return Err(at(format!("`spawns`: {c:?} twice")));
            }
            seen.push(c);
        }
        turns.push(Turn {
            messages: t.messages.clone(),
            model: t.model.clone(),
            max_tokens: t.max_tokens,
            tools: t.tools.clone(),
            extra,
            delay_ms: t.delay,
        });
        forks.push(fk);
        spawns.push(groups);
    }
    let mut pre: Vec<String> = Vec::new();
    for c in &raw.pre_session_spawns {
        if pre.contains(c) {
            return Err(format!("`pre_session_spawns`: {c:?} twice"));
        }
        pre.push(c.clone());
    }
    let session = Session {
        id: raw.session_id.clone(),
        line,
        turns,
    };
    Ok((session, Links { pre, forks, spawns }))
}

/// Which sessions are children (the rest are roots).
struct Graph {
    child: Vec<bool>,
}

/// Every link names a declared session, a FORK child has one parent and is no pre-session
/// spawn, `system` sits only where a history starts, and there is no cycle. Err: the session
/// at fault and why.
fn check_links(
    sessions: &[Session],
    links: &[Links],
    index: &HashMap<String, usize>,
) -> Result<Graph, (usize, String)> {
    let n = sessions.len();
    let mut child = vec![false; n];
    let mut fork_parent: Vec<Option<(usize, usize)>> = vec![None; n];
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (s, l) in links.iter().enumerate() {
        let sid = &sessions[s].id;
        let find = |c: &String, field: String| {
            index.get(c).copied().ok_or_else(|| {
                (
                    s,
                    format!(
                        "session {sid:?}: {field}: unknown session {c:?} (no line declares it)"
                    ),
                )
            })
        };
        for c in &l.pre {
            let c = find(c, "`pre_session_spawns`".into())?;
            child[c] = true;
            edges[s].push(c);
        }
        for (k, (forks, spawns)) in l.forks.iter().zip(&l.spawns).enumerate() {
            for (f, _) in forks {
                let c = find(f, format!("turn {k}: `forks`"))?;
                if let Some((p, pk)) = fork_parent[c] {
                    return Err((
                        s,
                        format!(
                            "session {sid:?}: turn {k}: `forks`: {f:?} is already forked by \
                             {:?} turn {pk}; a fork child has one parent (it continues that \
                             parent's history)",
                            sessions[p].id
                        ),
                    ));
                }
                fork_parent[c] = Some((s, k));
                child[c] = true;
                edges[s].push(c);
            }
            for c in spawns.iter().flat_map(|(c, _)| c) {
                let c = find(c, format!("turn {k}: `spawns`"))?;
                child[c] = true;
                edges[s].push(c);
            }
        }
    }
    for (s, l) in links.iter().enumerate() {
        for c in &l.pre {
            if fork_parent[index[c]].is_some() {
                return Err((
                    s,
                    format!(
                        "session {:?}: `pre_session_spawns`: {c:?} is also a fork child; a \
                         pre-session child is a spawn (a history of its own)",
                        sessions[s].id
                    ),
                ));
            }
        }
    }
    for (s, session) in sessions.iter().enumerate() {
        let starts_history = fork_parent[s].is_none();
        for (k, t) in session.turns.iter().enumerate() {
            if k == 0 && starts_history {
                continue;
            }
            if t.messages.iter().any(|m| m["role"] == "system") {
                let why = if k == 0 {
                    "its turn 0 continues its fork parent's history"
                } else {
                    "only a root's (or a spawned child's) turn 0 may have one"
                };
                return Err((
                    s,
                    format!(
                        "session {:?}: turn {k}: `messages`: a `system` message here: {why}",
                        session.id
                    ),
                ));
            }
        }
    }
    // Cycles: a depth-first walk, colouring each session once.
    let mut colour = vec![0u8; n];
    for start in 0..n {
        if colour[start] != 0 {
            continue;
        }
        let mut path: Vec<(usize, usize)> = vec![(start, 0)];
        colour[start] = 1;
        while let Some(&mut (s, ref mut next)) = path.last_mut() {
            match edges[s].get(*next).copied() {
                Some(c) => {
                    *next += 1;
                    match colour[c] {
                        0 => {
                            colour[c] = 1;
                            path.push((c, 0));
                        }
                        1 => {
                            let from = path.iter().position(|&(p, _)| p == c).unwrap_or(0);
                            let mut ids: Vec<&str> = path[from..]
                                .iter()
                                .map(|&(p, _)| sessions[p].id.as_str())
                                .collect();
                            ids.push(&sessions[c].id);
                            return Err((
                                c,
                                format!(
                                    "session {:?}: a cycle of links: {}",
                                    sessions[c].id,
                                    ids.join(" -> ")
                                ),
                            ));
                        }
                        _ => {}
                    }
                }
                None => {
                    colour[s] = 2;
                    path.pop();
                }
            }
        }
    }
    Ok(Graph { child })
}

/// Root session `root` as a tree: every session it starts instantiated, breadth first.
fn expand(
    sessions: &[Session],
    links: &[Links],
    index: &HashMap<String, usize>,
    root: usize,
) -> Result<DagTree, String> {
    let mut tree = DagTree {
        id: sessions[root].id.clone(),
        streams: vec![DagStream {
            id: sessions[root].id.clone(),
            session: root as u32,
            kind: StreamKind::Root,
            root_turn: 0,
        }],
        links: Vec::new(),
    };
    let mut s = 0;
    while s < tree.streams.len() {
        let session = tree.streams[s].session as usize;
        let l = &links[session];
        // Each link with its children's session ids (its stream ids are made below).
        let link = |turn: usize, on_send, join, fork| Link {
            parent: s as u32,
            turn: turn as u32,
            on_send,
            join,
            fork,
            children: Vec::new(),
        };
        let mut made: Vec<(Link, &[String])> = Vec::new();
        if !l.pre.is_empty() {
            made.push((link(0, true, None, false), &l.pre));
        }
        for (k, (forks, spawns)) in l.forks.iter().zip(&l.spawns).enumerate() {
            for (children, join) in spawns {
                made.push((link(k, false, *join, false), children));
            }
            for (c, _) in forks {
                made.push((link(k, false, None, true), std::slice::from_ref(c)));
            }
        }
        for (mut link, children) in made {
            for c in children {
                if tree.streams.len() >= MAX_STREAMS {
                    return Err(format!(
                        "session {:?}: its tree expands to more than {MAX_STREAMS} streams (a \
                         session spawned from several turns is replayed once per spawn)",
                        tree.id
                    ));
                }
                let parent = &tree.streams[s];
                let (kind, how) = match link.fork {
                    true => (StreamKind::Forked, "fork"),
                    false => (StreamKind::Spawned, "spawn"),
                };
                link.children.push(tree.streams.len() as u32);
                let stream = DagStream {
                    id: format!("{}::{how}:{c}", parent.id),
                    session: index[c] as u32,
                    kind,
                    root_turn: if s == 0 { link.turn } else { parent.root_turn },
                };
                tree.streams.push(stream);
            }
            tree.links.push(link);
        }
        s += 1;
    }
    Ok(tree)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The specification's example (SPEC §1.3) with the second worker declared.
    pub const EXAMPLE: &str = r#"{"session_id":"root","turns":[{"messages":[{"role":"system","content":"You are a coder"},{"role":"user","content":"Plan"}],"max_tokens":64,"spawns":[{"children":["w1","w2"],"join_at":2}]},{"messages":[{"role":"user","content":"go on"}],"delay":1000},{"messages":[{"role":"user","content":"merge"}],"delay":500,"extra":{"ignore_eos":true}}]}
{"session_id":"w1","turns":[{"messages":[{"role":"user","content":"search A"}],"max_tokens":32}]}
{"session_id":"w2","turns":[{"messages":[{"role":"user","content":"search B"}],"max_tokens":32}]}
"#;

    fn read_text(text: &str) -> Result<DagFile, String> {
        read(Path::new("f.jsonl"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn the_spec_example_is_one_tree_joined_at_turn_2() {
        let f = read_text(EXAMPLE).unwrap();
        assert_eq!(f.sessions.len(), 3);
        assert_eq!(f.trees.len(), 1);
        let t = &f.trees[0];
        let ids: Vec<&str> = t.streams.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["root", "root::spawn:w1", "root::spawn:w2"]);
        assert_eq!(
            t.links,
            [Link {
                parent: 0,
                turn: 0,
                on_send: false,
                join: Some(2),
                fork: false,
                children: vec![1, 2],
            }]
        );
        assert_eq!(f.sessions[0].turns[1].delay_ms, 1000.0);
        assert_eq!(f.sessions[0].turns[0].max_tokens, Some(64));
        assert_eq!(f.sessions[0].turns[2].extra["ignore_eos"], true);
    }

    #[test]
    fn bare_spawns_join_the_next_turn_and_a_last_turn_spawn_is_background() {
        let text = r#"{"session_id":"r","pre_session_spawns":["p"],"turns":[{"messages":[{"role":"user","content":"a"}],"spawns":["x","y"]},{"messages":[{"role":"user","content":"b"}],"spawns":["x"],"forks":[{"child":"f","background":true}]}]}
{"session_id":"x","turns":[{"messages":[{"role":"user","content":"x"}],"spawns":["p"]}]}
{"session_id":"y","turns":[{"messages":[{"role":"user","content":"y"}]}]}
{"session_id":"p","turns":[{"messages":[{"role":"system","content":"own history"},{"role":"user","content":"p"}]}]}
{"session_id":"f","turns":[{"messages":[{"role":"user","content":"f"}]}]}
"#;
        let f = read_text(text).unwrap();
        assert_eq!(f.trees.len(), 1, "x, y, p and f are children");
        let t = &f.trees[0];
        let ids: Vec<&str> = t.streams.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "r",
                "r::spawn:p",
                "r::spawn:x",
                "r::spawn:y",
                "r::spawn:x",
                "r::fork:f",
                "r::spawn:x::spawn:p",
                "r::spawn:x::spawn:p"
            ]
        );
        let link = |parent, turn, on_send, join, fork, children: &[u32]| Link {
            parent,
            turn,
            on_send,
            join,
            fork,
            children: children.to_vec(),
        };
        assert_eq!(
            t.links,
            [
                link(0, 0, true, None, false, &[1]),
                link(0, 0, false, Some(1), false, &[2, 3]),
                link(0, 1, false, None, false, &[4]),
                link(0, 1, false, None, true, &[5]),
                link(2, 0, false, None, false, &[6]),
                link(4, 0, false, None, false, &[7]),
            ]
        );
        assert_eq!(t.streams[4].root_turn, 1);
        assert_eq!(t.streams[7].root_turn, 1);
        assert!(t.forked(5) && !t.forked(4));
    }

    #[test]
    fn every_refusal_is_one_line_naming_the_line_and_field() {
        let user = r#"{"role":"user","content":"u"}"#;
        let one = |sid: &str, extra: &str| {
            format!(r#"{{"session_id":"{sid}","turns":[{{"messages":[{user}]{extra}}}]}}"#)
        };
        let two = |sid: &str, extra0: &str, extra1: &str| {
            format!(
                r#"{{"session_id":"{sid}","turns":[{{"messages":[{user}]{extra0}}},{{"messages":[{user}]{extra1}}}]}}"#
            )
        };
        let cases: Vec<(String, &str)> = vec![
            (one("r", r#","maxtokens":3"#), "f.jsonl:1: unknown field `maxtokens`"),
            (
                format!("{}\n{}", one("r", r#","spawns":["a"]"#), one("a", r#","spawns":["r"]"#)),
                "a cycle of links",
            ),
            (
                format!("{}\n{}", one("r", r#","spawns":["a"]"#), one("a", r#","spawns":["a"]"#)),
                "f.jsonl:2: session \"a\": a cycle of links: a -> a",
            ),
            (
                two("r", r#","forks":["c"]"#, "") + "\n" + &one("c", ""),
                "f.jsonl:1: session \"r\": turn 0: `forks`: a foreground fork (\"c\") must be on the session's last turn",
            ),
            (
                one("r", r#","spawns":["nobody"]"#),
                "f.jsonl:1: session \"r\": turn 0: `spawns`: unknown session \"nobody\"",
            ),
            (
                one("r", r#","max_tokens":0"#),
                "f.jsonl:1: session \"r\": turn 0: `max_tokens` 0",
            ),
            (
                one("r", r#","max_tokens":-2"#),
                "f.jsonl:1: `max_tokens`: invalid value",
            ),
            (
                one("r", r#","delay":-1"#),
                "f.jsonl:1: session \"r\": turn 0: `delay` -1",
            ),
            (
                two("r", r#","spawns":[{"children":["c"],"join_at":2}]"#, "") + "\n" + &one("c", ""),
                "turn 0: `spawns`: `join_at` 2 must be after the spawning turn",
            ),
            (
                one("r", r#","forks":["c"]"#) + "\n" + &one("s", r#","forks":["c"]"#) + "\n" + &one("c", ""),
                "is already forked by \"r\" turn 0",
            ),
            (
                format!("{}\n{}", one("r", ""), one("r", "")),
                "f.jsonl:2: session \"r\": duplicate `session_id`, also line 1",
            ),
            (
                r#"{"session_id":"r","turns":[{"messages":[{"content":"no role"}]}]}"#.into(),
                "turn 0: `messages` 0: no `role` string",
            ),
        ];
        for (i, (text, want)) in cases.iter().enumerate() {
            let e = read_text(text)
                .err()
                .unwrap_or_else(|| panic!("case {i} read"));
            assert!(e.contains(want), "case {i}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }

    #[test]
    fn system_messages_only_where_a_history_starts() {
        let sys = r#"{"role":"system","content":"s"}"#;
        let user = r#"{"role":"user","content":"u"}"#;
        let later = format!(
            r#"{{"session_id":"r","turns":[{{"messages":[{user}]}},{{"messages":[{sys},{user}]}}]}}"#
        );
        let e = read_text(&later).unwrap_err();
        assert!(
            e.contains("f.jsonl:1: session \"r\": turn 1: `messages`: a `system` message here"),
            "{e}"
        );
        let fork_child = format!(
            "{{\"session_id\":\"r\",\"turns\":[{{\"messages\":[{user}],\"forks\":[\"c\"]}}]}}\n\
             {{\"session_id\":\"c\",\"turns\":[{{\"messages\":[{sys},{user}]}}]}}"
        );
        let e = read_text(&fork_child).unwrap_err();
        assert!(
            e.contains("f.jsonl:2: session \"c\": turn 0: `messages`: a `system` message here: its turn 0 continues its fork parent's history"),
            "{e}"
        );
        // A spawned child starts a history of its own: its turn 0 may have one.
        let spawned = fork_child.replace("forks", "spawns");
        assert!(read_text(&spawned).is_ok());
    }
}
