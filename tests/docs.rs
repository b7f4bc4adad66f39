//! The documentation never shows a refused flag as working: every `vllm-bench` command in a
//! code block of README.md and docs/*.md that uses something on the refused list
//! (`cli::unimplemented::UNIMPLEMENTED`) sits in a block that shows the refusal
//! (`# error: FLAG: not implemented yet ...`).

use std::path::Path;

use vllm_bench::cli::unimplemented::UNIMPLEMENTED;

/// README.md and every page of docs/.
fn documents() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    docs.insert(0, "README.md".to_string());
    docs
}

/// The fenced code blocks of a Markdown text.
fn code_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            match current.take() {
                Some(block) => blocks.push(block),
                None => current = Some(String::new()),
            }
        } else if let Some(block) = current.as_mut() {
            block.push_str(line);
            block.push('\n');
        }
    }
    blocks
}

/// The `vllm-bench` command lines of a block (continuations joined), comments cut.
fn commands(block: &str) -> Vec<Vec<String>> {
    let joined = block.replace("\\\n", " ");
    joined
        .lines()
        .filter_map(|l| {
            let l = l.split(" #").next().unwrap_or("");
            let at = l.find("vllm-bench ")?;
            Some(l[at..].split_whitespace().map(str::to_string).collect())
        })
        .collect()
}

/// The refused entries a command uses (`--flag`, or `--flag value` for a refused choice).
fn refused_in(cmd: &[String]) -> Vec<&'static str> {
    UNIMPLEMENTED
        .iter()
        .copied()
        .filter(|entry| match entry.split_once(' ') {
            Some((flag, value)) => cmd.windows(2).any(|w| w[0] == flag && w[1] == value),
            None => cmd
                .iter()
                .any(|t| t == entry || t.starts_with(&format!("{entry}="))),
        })
        .collect()
}

/// The misdocumented commands of `doc`, and how many commands it has.
fn check(doc: &str) -> (Vec<String>, usize) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(doc);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{doc}: {e}"));
    let (mut wrong, mut seen) = (Vec::new(), 0);
    for block in code_blocks(&text) {
        for cmd in commands(&block) {
            seen += 1;
            for entry in refused_in(&cmd) {
                let shown = format!("# error: {entry}: not implemented yet");
                if !block.contains(&shown) {
                    wrong.push(format!("{doc}: `{}` uses {entry}", cmd.join(" ")));
                }
            }
        }
    }
    (wrong, seen)
}

#[test]
fn no_refused_flag_is_documented_as_working() {
    let mut wrong = Vec::new();
    for doc in documents() {
        let (w, seen) = check(&doc);
        if doc == "docs/flags.md" {
            assert!(seen > 10, "{doc}: only {seen} commands found");
        }
        wrong.extend(w);
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_check_sees_a_refused_flag_and_its_refusal() {
    let block = "vllm-bench --mock-server \\\n  --custom-ensure-client-side-data\n";
    let cmds = commands(block);
    assert_eq!(refused_in(&cmds[0]), ["--custom-ensure-client-side-data"]);
    assert!(refused_in(&commands("vllm-bench --dataset-name random\n")[0]).is_empty());
    assert_eq!(
        refused_in(&commands("vllm-bench --custom-ensure-client-side-data # a\n")[0]),
        ["--custom-ensure-client-side-data"]
    );
    assert_eq!(code_blocks("a\n```sh\nx\n```\nb\n"), ["x\n"]);
}

/// The other direction: a refusal the docs show names something that is refused, and every
/// flag that works is in the flag reference (docs/flags.md), so a flag that lands is
/// documented and a documented refusal cannot outlive the feature.
#[test]
fn working_flags_are_documented_and_refusals_are_real() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for doc in documents() {
        let text = std::fs::read_to_string(root.join(&doc)).unwrap();
        for line in text.lines() {
            let Some(rest) = line.split("error: ").nth(1) else {
                continue;
            };
            let Some((what, _)) = rest.split_once(": not implemented yet") else {
                continue;
            };
            assert!(
                UNIMPLEMENTED.contains(&what),
                "{doc} shows `{what}` refused, but it runs: {line}"
            );
        }
    }
    let flags = std::fs::read_to_string(root.join("docs/flags.md")).unwrap();
    let undocumented: Vec<String> = vllm_bench::cli::command()
        .get_arguments()
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .filter(|f| f != "--help" && f != "--version" && !UNIMPLEMENTED.contains(&f.as_str()))
        .filter(|f| !flags.contains(f.as_str()))
        .collect();
    assert!(
        undocumented.is_empty(),
        "not in docs/flags.md: {undocumented:?}"
    );
}
