//! The command line of `main.rs`: perf-style short flags mean what their long forms mean, and a
//! command after `tracer record` gets its own options untouched, with or without `--`.
use clap::{CommandFactory, Parser};

use super::main_args::{Cli, Command, RecordArgs, SweepArgs};

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("tracer").chain(args.iter().copied()))
}

fn record(args: &[&str]) -> RecordArgs {
    let mut v = vec!["record"];
    v.extend(args);
    match parse(&v).unwrap_or_else(|e| panic!("{v:?}: {e}")).command {
        Command::Record(a) => a,
        _ => panic!("{v:?}: not record"),
    }
}

fn sweep(args: &[&str]) -> SweepArgs {
    let mut v = vec!["sweep"];
    v.extend(args);
    match parse(&v).unwrap_or_else(|e| panic!("{v:?}: {e}")).command {
        Command::Sweep(a) => a,
        _ => panic!("{v:?}: not sweep"),
    }
}

/// What a record command line asks for, comparable across spellings.
fn meaning(a: &RecordArgs) -> String {
    format!(
        "pid={:?} system={} duration={:?} freq={} targets={:?} output={:?} command={:?}",
        a.pid, a.system, a.duration, a.freq, a.targets.targets, a.output, a.command
    )
}

#[test]
fn short_and_long_record_flags_mean_the_same() {
    let pairs: &[(&[&str], &[&str])] = &[
        (
            &["-p", "4242", "-d", "30s"],
            &["--pid", "4242", "--duration", "30s"],
        ),
        (
            &["-p", "1,2", "-p", "3"],
            &["--pid", "1", "--pid", "2", "--pid=3"],
        ),
        (&["-a", "-F", "4999"], &["--system", "--freq", "4999"]),
        (
            &["-t", "do_wait,dup_mmap", "-o", "out"],
            &[
                "--targets",
                "do_wait",
                "--targets",
                "dup_mmap",
                "--output",
                "out",
            ],
        ),
        (
            &["-F4999", "-tdo_wait"],
            &["--freq=4999", "--targets=do_wait"],
        ),
    ];
    for (short, long) in pairs {
        let (s, l) = (record(short), record(long));
        assert_eq!(meaning(&s), meaning(&l), "{short:?} vs {long:?}");
    }
    let a = record(&["-p", "1,2", "-p", "3", "-d", "30s", "-F", "4999"]);
    assert_eq!(a.pid, vec![1, 2, 3]);
    assert_eq!(a.duration, Some(std::time::Duration::from_secs(30)));
    assert_eq!(a.freq, 4999);
    assert!(record(&["-a"]).system);
    assert_eq!(
        record(&["-t", "do_wait,dup_mmap"]).targets.targets,
        ["do_wait", "dup_mmap"]
    );
}

#[test]
fn the_command_needs_no_double_dash_and_keeps_its_own_options() {
    let cmd = |args: &[&str]| record(args).command;
    assert_eq!(cmd(&["./bench"]), ["./bench"]);
    assert_eq!(cmd(&["./bench", "arg"]), ["./bench", "arg"]);
    assert_eq!(cmd(&["--", "./bench", "arg"]), ["./bench", "arg"]);
    // Options after the command are the command's, even ones tracer also has.
    assert_eq!(
        cmd(&[
            "-F", "99", "./bench", "-x", "--size", "10", "-p", "1", "-v", "--help"
        ]),
        ["./bench", "-x", "--size", "10", "-p", "1", "-v", "--help"]
    );
    assert_eq!(
        cmd(&["-t", "do_wait", "--", "./bench", "--", "-x"]),
        ["./bench", "--", "-x"]
    );
    let a = record(&["-v", "./bench", "-v"]);
    assert_eq!(a.command, ["./bench", "-v"]);
    assert_eq!(a.freq, 999, "the default frequency is kept");
    let cli = parse(&["-v", "record", "./bench", "-v"]).unwrap();
    assert!(cli.verbose, "tracer's own -v before the command");
    let cli = parse(&["record", "./bench", "-v"]).unwrap();
    assert!(!cli.verbose, "-v after the command is the command's");
}

#[test]
fn mistyped_options_before_the_command_are_usage_errors_not_commands() {
    for args in [
        &["record", "--frq", "99", "./bench"][..],
        &["record", "-x", "./bench"],
        &["record", "--pid", "-3"],
        &["record", "-p", "1,x"],
        &["record", "-F"],
        &["sweep", "getpid", "-F", "x"],
    ] {
        let e = parse(args)
            .err()
            .unwrap_or_else(|| panic!("{args:?} parsed"));
        assert_ne!(e.kind(), clap::error::ErrorKind::DisplayHelp, "{args:?}");
        assert_eq!(e.exit_code(), 2, "{args:?}: {e}");
    }
}

#[test]
fn sweep_has_the_short_flags_that_apply_and_keeps_its_trailing_arguments() {
    let s = sweep(&[
        "waitpid",
        "-t",
        "do_wait",
        "-F",
        "99",
        "-o",
        "out",
        "--",
        "--iterations",
        "5",
    ]);
    let l = sweep(&[
        "waitpid",
        "--targets",
        "do_wait",
        "--freq",
        "99",
        "--output",
        "out",
        "--",
        "--iterations",
        "5",
    ]);
    for a in [&s, &l] {
        assert_eq!(a.workloads, ["waitpid"]);
        assert_eq!(a.targets.targets, ["do_wait"]);
        assert_eq!(a.freq, 99);
        assert_eq!(a.output.as_deref(), Some(std::path::Path::new("out")));
        assert_eq!(a.extra, ["--iterations", "5"]);
    }
    assert_eq!(sweep(&["waitpid"]).freq, 4999);
}

/// `--help` lists both spellings of every perf-style flag.
#[test]
fn help_shows_both_spellings() {
    let mut cmd = Cli::command();
    let record = cmd
        .find_subcommand_mut("record")
        .unwrap()
        .render_help()
        .to_string();
    for both in [
        "-p, --pid",
        "-a, --system",
        "-F, --freq",
        "-d, --duration",
        "-t, --targets",
        "-o, --output",
    ] {
        assert!(
            record.contains(both),
            "record --help lacks {both}:\n{record}"
        );
    }
    assert!(record.contains("[COMMAND]..."), "{record}");
    let sweep = cmd
        .find_subcommand_mut("sweep")
        .unwrap()
        .render_help()
        .to_string();
    for both in ["-F, --freq", "-t, --targets", "-o, --output"] {
        assert!(sweep.contains(both), "sweep --help lacks {both}:\n{sweep}");
    }
}

#[test]
fn hidden_helpers_parse_but_stay_out_of_help_and_completions() {
    match parse(&[
        "__floor", "--timed", "kprobe", "do_wait", "--", "true", "-x",
    ])
    .unwrap()
    .command
    {
        Command::Floor(a) => {
            assert!(a.timed);
            assert_eq!((a.mech.as_str(), a.points.as_str()), ("kprobe", "do_wait"));
            assert_eq!(a.command, ["true", "-x"]);
        }
        _ => panic!("not __floor"),
    }
    let e = parse(&["__floor", "kprobe", "do_wait"]).err().unwrap();
    assert_eq!(e.exit_code(), tracer::error::exit::USAGE);
    assert!(matches!(
        parse(&["__man", "/tmp/m"]).unwrap().command,
        Command::Man(_)
    ));
    let help = Cli::command().render_long_help().to_string();
    let mut script = Vec::new();
    clap_complete::generate(
        clap_complete::Shell::Bash,
        &mut super::visible_command(),
        "tracer",
        &mut script,
    );
    for text in [help, String::from_utf8(script).unwrap()] {
        assert!(
            !text.contains("__floor") && !text.contains("__man"),
            "{text}"
        );
    }
}

/// `--fail-on` and `--expect` take comma lists and repeats alike; a word they do not know is
/// a usage error (exit 2) before anything runs.
#[test]
fn gate_flags_take_comma_lists_and_repeats() {
    use tracer::analysis::compare::Change;
    use tracer::analysis::fit::Complexity;
    use tracer::gate::FailOn;
    let fail_on = |args: &[&str]| {
        let mut v = vec!["compare", "a", "b"];
        v.extend(args);
        match parse(&v).unwrap_or_else(|e| panic!("{v:?}: {e}")).command {
            Command::Compare(a) => a.fail_on,
            _ => panic!("not compare"),
        }
    };
    let both = [
        FailOn::Outcome(Change::Grew),
        FailOn::Outcome(Change::Shrank),
    ];
    assert_eq!(fail_on(&["--fail-on", "grew,shrank"]), both);
    assert_eq!(fail_on(&["--fail-on", "grew", "--fail-on", "shrank"]), both);
    assert_eq!(fail_on(&["--fail-on=changed"]), [FailOn::Changed]);
    assert_eq!(fail_on(&[]), []);

    let specs = |e: &[tracer::gate::Expect]| e.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let a = sweep(&[
        "waitpid",
        "--expect",
        "do_wait:O(1),do_wait/waitpid-any:O(n²)",
        "--expect",
        "dup_mmap:o(n log n)",
    ]);
    assert_eq!(
        specs(&a.expect.expect),
        [
            "do_wait:O(1)",
            "do_wait/waitpid-any:O(n^2)",
            "dup_mmap:O(n log n)"
        ]
    );
    assert_eq!(a.expect.expect[2].class, Complexity::NLogN);
    match parse(&["report", "dir", "--expect", "do_wait:O(n)"])
        .unwrap()
        .command
    {
        Command::Report(r) => assert_eq!(specs(&r.expect.expect), ["do_wait:O(n)"]),
        _ => panic!("not report"),
    }
    for bad in [
        &["compare", "a", "b", "--fail-on", "worse"][..],
        &["compare", "a", "b", "--fail-on", "grew,"],
        &["sweep", "waitpid", "--expect", "do_wait"],
        &["sweep", "waitpid", "--expect", "do_wait:O(n^3)"],
        &["report", "dir", "--expect", "do_wait/:O(1)"],
    ] {
        let e = parse(bad).err().unwrap_or_else(|| panic!("{bad:?} parsed"));
        assert_eq!(e.exit_code(), tracer::error::exit::USAGE, "{bad:?}: {e}");
    }
}
