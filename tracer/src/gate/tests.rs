use super::*;
use crate::analysis::{Analysis, compare, testdata};

use crate::analysis::testdata::analysis_of as analysis;

/// do_wait [waitpid-pid] growing like N (a loop, as on 5.10), and flat (fixed).
fn linear() -> Analysis {
    analysis(testdata::waitpid_run(&[10, 100, 1000, 8000], |n| {
        1000 + 5 * n
    }))
}
fn flat() -> Analysis {
    analysis(testdata::waitpid_run(&[10, 100, 1000, 8000], |_| 1010))
}

fn expect(s: &str) -> Expect {
    Expect::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[test]
fn fail_on_takes_each_outcome_of_the_compare_and_changed() {
    use Change::*;
    for c in [Grew, Shrank, Same, Inconclusive] {
        assert_eq!(FailOn::parse(c.label()), Ok(FailOn::Outcome(c)));
        for other in [Grew, Shrank, Same, Inconclusive] {
            assert_eq!(
                FailOn::Outcome(c).covers(other),
                c == other,
                "{c:?} {other:?}"
            );
        }
    }
    assert_eq!(FailOn::parse(" Grew "), Ok(FailOn::Outcome(Grew)));
    assert_eq!(FailOn::parse("changed"), Ok(FailOn::Changed));
    let changed: Vec<Change> = [Grew, Shrank, Same, Inconclusive]
        .into_iter()
        .filter(|&c| FailOn::Changed.covers(c))
        .collect();
    assert_eq!(changed, [Grew, Shrank]);
    for bad in ["", "grow", "regressed", "grew,shrank"] {
        let e = FailOn::parse(bad).unwrap_err();
        assert!(
            matches!(e, SpecError::UnknownOutcome { .. }),
            "{bad:?}: {e:?}"
        );
    }
    assert_eq!(
        FailOn::parse("worse").unwrap_err().to_string(),
        "\"worse\" is not an outcome of tracer compare: use grew, shrank, same, inconclusive, \
         changed"
    );
}

#[test]
fn every_class_the_fits_name_parses_from_its_label() {
    let all: Vec<Complexity> = classes().collect();
    assert_eq!(all.len(), 1 + Complexity::GROWING.len());
    assert_eq!(all[0], Complexity::Constant);
    for c in all {
        assert_eq!(parse_class(c.label()), Ok(c), "{}", c.label());
        let e = Expect {
            target: "t".into(),
            case_name: Some("c".into()),
            class: c,
        };
        assert_eq!(Expect::parse(&e.to_string()), Ok(e.clone()), "{e}");
    }
    assert_eq!(parse_class("o(N LOG N)"), Ok(Complexity::NLogN));
    assert_eq!(parse_class("O(nlogn)"), Ok(Complexity::NLogN));
    assert_eq!(parse_class("O(n²)"), Ok(Complexity::Quadratic));
    assert_eq!(parse_class(" O( n^2 ) "), Ok(Complexity::Quadratic));
    for bad in ["O(n^3)", "O(n³)", "linear", "n", "O(2^n)", ""] {
        assert!(
            matches!(parse_class(bad), Err(SpecError::UnknownClass { .. })),
            "{bad:?}"
        );
    }
    assert_eq!(
        parse_class("O(n^3)").unwrap_err().to_string(),
        "\"O(n^3)\" is not a class the fits name: use O(1), O(log n), O(n), O(n log n), O(n^2)"
    );
}

#[test]
fn expect_names_a_target_or_one_of_its_cases() {
    assert_eq!(
        expect("do_wait:O(1)"),
        Expect {
            target: "do_wait".into(),
            case_name: None,
            class: Complexity::Constant
        }
    );
    assert_eq!(
        expect(" do_wait/waitpid-pid : O(n) "),
        Expect {
            target: "do_wait".into(),
            case_name: Some("waitpid-pid".into()),
            class: Complexity::Linear
        }
    );
    for bad in [
        "do_wait",
        ":O(1)",
        "do_wait/:O(1)",
        "/x:O(1)",
        "do_wait:",
        "O(1)",
    ] {
        assert!(
            matches!(Expect::parse(bad), Err(SpecError::Malformed { .. })),
            "{bad:?}: {:?}",
            Expect::parse(bad)
        );
    }
    assert!(matches!(
        Expect::parse("do_wait:O(n^3)"),
        Err(SpecError::UnknownClass { .. })
    ));
}

#[test]
fn fail_on_trips_on_the_outcomes_named_and_cannot_judge_an_empty_compare() {
    let (l, f) = (linear(), flat());
    let c = compare(&l, &f);
    assert_eq!(c.classes.len(), 1);
    assert_eq!(c.classes[0].growth.change, Change::Shrank, "precondition");
    let status = |words: &[FailOn]| FailOnGate::judge(words, &c).status();
    assert_eq!(status(&[FailOn::Outcome(Change::Grew)]), GateStatus::Passed);
    assert_eq!(status(&[FailOn::Changed]), GateStatus::Failed);
    assert_eq!(
        status(&[
            FailOn::Outcome(Change::Grew),
            FailOn::Outcome(Change::Shrank)
        ]),
        GateStatus::Failed
    );
    // The same comparison the other way round grew.
    let back = compare(&f, &l);
    let g = FailOnGate::judge(&[FailOn::Outcome(Change::Grew)], &back);
    assert_eq!(g.status(), GateStatus::Failed);
    let tripped: Vec<_> = g.tripped().map(|t| t.case_name.as_str()).collect();
    assert_eq!(tripped, ["waitpid-pid"]);
    assert_eq!(
        text::fail_on(&g),
        [
            "Gate --fail-on grew: failed (exit 9): 1 of 1 verdict tripped it:",
            "  do_wait [waitpid-pid]: grew",
        ]
    );
    // The same word twice is one word.
    let g = FailOnGate::judge(&[FailOn::Changed, FailOn::Changed], &c);
    assert_eq!(g.fail_on, [FailOn::Changed]);

    // No verdict on either side (sides with no traced target): not a pass.
    let none = |mut a: Analysis| {
        for r in &mut a.runs {
            r.cases.clear();
        }
        a
    };
    let (nl, nf) = (none(linear()), none(flat()));
    let empty = compare(&nl, &nf);
    assert!(empty.classes.is_empty(), "precondition");
    let g = FailOnGate::judge(&[FailOn::Changed], &empty);
    assert_eq!(g.status(), GateStatus::Unjudged);
    assert!(
        text::fail_on(&g)[0]
            .starts_with("Gate --fail-on changed: cannot judge (exit 10): no verdicts to gate on")
    );
    assert_eq!(
        [GateStatus::Passed, GateStatus::Failed, GateStatus::Unjudged].map(|s| s.exit_code()),
        [0, 9, 10]
    );
}

#[test]
fn expect_fails_when_the_class_set_excludes_the_class() {
    let a = linear();
    assert_eq!(
        a.runs[0].cases[0].verdict.classes(),
        [Complexity::Linear],
        "precondition"
    );
    let judge = |specs: &[&str], a: &Analysis| {
        let e: Vec<Expect> = specs.iter().map(|s| expect(s)).collect();
        ExpectGate::judge(&e, a.cases())
    };
    assert_eq!(judge(&["do_wait:O(n)"], &a).status(), GateStatus::Passed);
    assert_eq!(
        judge(&["do_wait/waitpid-pid:O(n)"], &a).status(),
        GateStatus::Passed
    );
    let g = judge(&["do_wait:O(1)"], &a);
    assert_eq!(g.status(), GateStatus::Failed);
    assert_eq!(
        text::expect(&g),
        [
            "Gate --expect do_wait:O(1): failed (exit 9): 1 of 1 verdict excludes the class \
             expected",
            "  do_wait [waitpid-pid]: expected O(1), fitted O(n): trips the gate",
        ]
    );
    assert_eq!(
        judge(&["do_wait:O(1)"], &flat()).status(),
        GateStatus::Passed
    );
    // One expectation failing fails the gate.
    assert_eq!(
        judge(&["do_wait:O(n)", "do_wait:O(n^2)"], &a).status(),
        GateStatus::Failed
    );

    // A class set of several holds each of its members, and nothing else.
    let mut wide = linear();
    let s = wide.runs[0].cases[0].verdict.scaling.as_mut().unwrap();
    s.classes = vec![Complexity::Linear, Complexity::NLogN];
    for (spec, status) in [
        ("do_wait:O(n)", GateStatus::Passed),
        ("do_wait:O(n log n)", GateStatus::Passed),
        ("do_wait:O(log n)", GateStatus::Failed),
        ("do_wait:O(n^2)", GateStatus::Failed),
    ] {
        assert_eq!(judge(&[spec], &wide).status(), status, "{spec}");
    }

    // "O(n) by loop count" is {O(n)}, whatever the time alone left.
    wide.runs[0].cases[0].verdict.by_loop = Some(crate::analysis::trips::LoopClass {
        inner: "wait_consider_task".into(),
        run: "r".into(),
        class: Complexity::Linear,
        slope: 1.0,
        per_trip_slope: 0.0,
        counted_only: None,
        longest: false,
    });
    assert_eq!(judge(&["do_wait:O(n)"], &wide).status(), GateStatus::Passed);
    let g = judge(&["do_wait:O(n log n)"], &wide);
    assert_eq!(g.status(), GateStatus::Failed);
    assert_eq!(
        text::expect(&g)[1],
        "  do_wait [waitpid-pid]: expected O(n log n), fitted O(n) by loop count: trips the gate"
    );
}

#[test]
fn expect_cannot_judge_what_is_not_there_or_not_fitted() {
    let a = linear();
    let judge = |specs: &[&str], a: &Analysis| {
        let e: Vec<Expect> = specs.iter().map(|s| expect(s)).collect();
        ExpectGate::judge(&e, a.cases())
    };
    for spec in ["dup_mmap:O(1)", "do_wait/waitpid-any:O(n)"] {
        let g = judge(&[spec], &a);
        assert_eq!(g.status(), GateStatus::Unjudged, "{spec}");
        assert!(
            text::expect(&g)[1]
                .ends_with(": not in the data (its verdicts: do_wait [waitpid-pid])"),
            "{:?}",
            text::expect(&g)
        );
    }
    // Not judged wins over failed: the gate, or the data, needs fixing first.
    assert_eq!(
        judge(&["do_wait:O(1)", "dup_mmap:O(1)"], &a).status(),
        GateStatus::Unjudged
    );
    // One size: nothing fitted.
    let one = analysis(testdata::waitpid_run(&[100], |n| 1000 + 5 * n));
    assert!(
        one.runs[0].cases[0].verdict.classes().is_empty(),
        "precondition"
    );
    let g = judge(&["do_wait:O(1)"], &one);
    assert_eq!(g.status(), GateStatus::Unjudged);
    assert_eq!(
        text::expect(&g)[1],
        "  do_wait [waitpid-pid]: expected O(1): no fitted class to judge"
    );
    // No traced target at all (a --discover sweep): said so.
    let g = ExpectGate::judge(&[expect("do_wait:O(1)")], []);
    assert_eq!(g.status(), GateStatus::Unjudged);
    assert!(text::expect(&g)[1].contains("its verdicts: none: no target was traced"));
}
