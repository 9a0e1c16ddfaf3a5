//! Debian versions and package relations: their order (as dpkg orders them) and the
//! `Depends:`-style fields that name them.

/// Debian's version order (Debian Policy §5.6.12): the epoch numerically, then the
/// upstream version, then the revision. Those two are compared as alternating runs:
/// a run of non-digits character by character, where `~` sorts before anything (even the
/// end of the run, so `1.0~rc1` < `1.0`) and letters before other characters; then a run
/// of digits as a number.
pub fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    let (ea, ua, ra) = split_version(a);
    let (eb, ub, rb) = split_version(b);
    ea.cmp(&eb)
        .then_with(|| compare_part(ua, ub))
        .then_with(|| compare_part(ra, rb))
}

/// `[epoch:]upstream[-revision]`; the revision is after the last hyphen.
fn split_version(v: &str) -> (u64, &str, &str) {
    let (epoch, rest) = match v.split_once(':') {
        Some((e, rest)) if !e.is_empty() && e.bytes().all(|c| c.is_ascii_digit()) => {
            (e.parse().unwrap_or(u64::MAX), rest)
        }
        _ => (0, v),
    };
    let (upstream, revision) = rest.rsplit_once('-').unwrap_or((rest, ""));
    (epoch, upstream, revision)
}

/// The weight of one character of a non-digit run; `None` is the end of the run.
fn weight(c: Option<u8>) -> i32 {
    match c {
        Some(b'~') => -1,
        None => 0,
        Some(c) if c.is_ascii_alphabetic() => i32::from(c),
        Some(c) => i32::from(c) + 256,
    }
}

fn compare_part(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    let run = |s: &[u8], digits: bool| {
        s.iter()
            .take_while(|c| c.is_ascii_digit() == digits)
            .count()
    };
    while !a.is_empty() || !b.is_empty() {
        let (sa, rest_a) = a.split_at(run(a, false));
        let (sb, rest_b) = b.split_at(run(b, false));
        for i in 0..sa.len().max(sb.len()) {
            let o = weight(sa.get(i).copied()).cmp(&weight(sb.get(i).copied()));
            if o != Ordering::Equal {
                return o;
            }
        }
        let (da, rest_a) = rest_a.split_at(run(rest_a, true));
        let (db, rest_b) = rest_b.split_at(run(rest_b, true));
        // As numbers of any length: without leading zeros, longer is larger.
        let strip =
            |d: &[u8]| -> Vec<u8> { d.iter().copied().skip_while(|&c| c == b'0').collect() };
        let (na, nb) = (strip(da), strip(db));
        let o = na.len().cmp(&nb.len()).then_with(|| na.cmp(&nb));
        if o != Ordering::Equal {
            return o;
        }
        a = rest_a;
        b = rest_b;
    }
    Ordering::Equal
}

/// A version relation of a dependency field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionOp {
    Earlier,
    EarlierOrEqual,
    Equal,
    LaterOrEqual,
    Later,
}

impl VersionOp {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "<<" => VersionOp::Earlier,
            // `<` and `>` are the obsolete spellings of `<=` and `>=` (Policy §7.1).
            "<=" | "<" => VersionOp::EarlierOrEqual,
            "=" => VersionOp::Equal,
            ">=" | ">" => VersionOp::LaterOrEqual,
            ">>" => VersionOp::Later,
            _ => return None,
        })
    }

    pub fn symbol(self) -> &'static str {
        match self {
            VersionOp::Earlier => "<<",
            VersionOp::EarlierOrEqual => "<=",
            VersionOp::Equal => "=",
            VersionOp::LaterOrEqual => ">=",
            VersionOp::Later => ">>",
        }
    }

    /// Whether `version` stands in this relation to `bound`.
    pub fn holds(self, version: &str, bound: &str) -> bool {
        use std::cmp::Ordering::*;
        let o = compare_versions(version, bound);
        match self {
            VersionOp::Earlier => o == Less,
            VersionOp::EarlierOrEqual => o != Greater,
            VersionOp::Equal => o == Equal,
            VersionOp::LaterOrEqual => o != Less,
            VersionOp::Later => o == Greater,
        }
    }
}

/// One package named in a relationship field (`Depends`, `Breaks`, `Conflicts`, ...),
/// optionally with a version relation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    pub package: String,
    pub version: Option<(VersionOp, String)>,
}

impl Relation {
    /// Whether `package` at `version` satisfies (or, in Breaks and Conflicts, matches)
    /// this relation.
    pub fn matches(&self, package: &str, version: &str) -> bool {
        self.package == package
            && self
                .version
                .as_ref()
                .is_none_or(|(op, bound)| op.holds(version, bound))
    }
}

impl std::fmt::Display for Relation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.version {
            Some((op, v)) => write!(f, "{} ({} {v})", self.package, op.symbol()),
            None => write!(f, "{}", self.package),
        }
    }
}

/// Parses a relationship field of a binary package into its clauses (comma-separated),
/// each a list of alternatives (`|`). An architecture qualifier (`:any`) is dropped;
/// a relation whose operator cannot be read is kept without its version.
pub fn parse_relations(field: &str) -> Vec<Vec<Relation>> {
    field
        .split(',')
        .map(|clause| {
            clause
                .split('|')
                .filter_map(|alt| {
                    let alt = alt.trim();
                    let end = alt
                        .find(|c: char| c.is_whitespace() || c == '(')
                        .unwrap_or(alt.len());
                    let package = alt[..end].split(':').next().unwrap_or("").to_string();
                    if package.is_empty() {
                        return None;
                    }
                    let version = alt[end..]
                        .trim()
                        .strip_prefix('(')
                        .and_then(|r| r.split(')').next())
                        .and_then(|inner| {
                            let inner = inner.trim();
                            let op_len = inner
                                .find(|c: char| !matches!(c, '<' | '>' | '='))
                                .unwrap_or(inner.len());
                            let op = VersionOp::parse(&inner[..op_len])?;
                            let v = inner[op_len..].trim();
                            (!v.is_empty()).then(|| (op, v.to_string()))
                        });
                    Some(Relation { package, version })
                })
                .collect::<Vec<_>>()
        })
        .filter(|c| !c.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn versions_order_as_debian_orders_them() {
        use std::cmp::Ordering::*;
        for (a, b, want) in [
            // The epoch outranks everything after it.
            ("1:7.2+dfsg-7", "10.0.2+ds-2", Greater),
            (
                "1:10.0.2+ds-2+deb13u1~bpo12+1",
                "1:7.2+dfsg-7+deb12u18+b3",
                Greater,
            ),
            // `~` sorts before the end: a backport is older than the release it came from.
            (
                "1:10.0.2+ds-2+deb13u1~bpo12+1",
                "1:10.0.2+ds-2+deb13u1",
                Less,
            ),
            ("1.16.3-2~bpo12+1", "1.16.3-1~", Greater),
            ("1.0~rc1", "1.0", Less),
            ("1.0~~", "1.0~", Less),
            // Digit runs are numbers; letters sort before other characters.
            ("1.10", "1.9", Greater),
            ("1.010", "1.10", Equal),
            ("1.0a", "1.0+", Less),
            ("1.0", "1.0a", Less),
            // No revision is the same as an empty one, and the revision breaks ties.
            ("2.36", "2.36-0", Equal),
            ("2.36-9+deb12u14", "2.36-9+deb12u9", Greater),
            ("1:1.35.0-4+deb12u1+b1", "1:1.35.0-4+b3", Greater),
            ("123456789012345678901234567890", "99", Greater),
        ] {
            assert_eq!(compare_versions(a, b), want, "{a} vs {b}");
            assert_eq!(compare_versions(b, a), want.reverse(), "{b} vs {a}");
        }
    }

    /// The same pairs as dpkg itself orders them, so the table above cannot be wrong in
    /// a way both the table and the code share.

    #[test]
    fn versions_order_as_dpkg_orders_them() {
        let pairs = [
            ("1:10.0.2+ds-2+deb13u1~bpo12+1", "1:10.0.2+ds-2+deb13u1"),
            ("1.16.3-2~bpo12+1", "1.16.3-1~"),
            ("1.0a", "1.0+"),
            ("1.0", "1.0a"),
            ("2.36", "2.36-0"),
            ("1:1.35.0-4+deb12u1+b1", "1:1.35.0-4+b3"),
            ("0.9~beta.2", "0.9~beta.10"),
            ("3.0.2-0ubuntu1", "3.0.2-0+deb12u1"),
        ];
        for (a, b) in pairs {
            for (op, want) in [
                ("lt", compare_versions(a, b).is_lt()),
                ("eq", compare_versions(a, b).is_eq()),
                ("gt", compare_versions(a, b).is_gt()),
            ] {
                let st = Command::new("dpkg")
                    .args(["--compare-versions", a, op, b])
                    .status()
                    .expect("dpkg runs");
                assert_eq!(st.success(), want, "dpkg --compare-versions {a} {op} {b}");
            }
        }
    }

    #[test]
    fn relations_are_parsed_with_alternatives_and_versions() {
        let f = "libaio1 (>= 0.3.93), qemu-system-any (= 1:10.0.2+ds-2) | qemu-utils (= \
                 1:10.0.2+ds-2), ipxe-qemu,python3:any (>>3.9), bad (~> 1)";
        let r = parse_relations(f);
        assert_eq!(r.len(), 5);
        assert_eq!(
            r[0],
            vec![Relation {
                package: "libaio1".into(),
                version: Some((VersionOp::LaterOrEqual, "0.3.93".into()))
            }]
        );
        assert_eq!(r[1].len(), 2);
        assert_eq!(r[1][1].package, "qemu-utils");
        assert_eq!(r[1][1].to_string(), "qemu-utils (= 1:10.0.2+ds-2)");
        assert_eq!(r[2][0].version, None);
        assert_eq!(
            r[3][0],
            Relation {
                package: "python3".into(),
                version: Some((VersionOp::Later, "3.9".into()))
            }
        );
        // An unreadable operator keeps the name, without a version to compare.
        assert_eq!(r[4][0].package, "bad");
        assert_eq!(r[4][0].version, None);
        assert!(parse_relations("").is_empty());
    }

    #[test]
    fn relations_match_by_name_and_version() {
        let breaks = &parse_relations("qemu-system-common (<< 1:8.0+dfsg-5~)")[0][0];
        assert!(breaks.matches("qemu-system-common", "1:7.2+dfsg-7+deb12u18+b3"));
        assert!(!breaks.matches("qemu-system-common", "1:10.0.2+ds-2+deb13u1~bpo12+1"));
        assert!(!breaks.matches("qemu-system-data", "1:7.2+dfsg-7+deb12u18"));
        let any = &parse_relations("busybox")[0][0];
        assert!(any.matches("busybox", "1:1.35.0-4+b3"));
        let later = &parse_relations("seabios (>> 1.16.3-1~)")[0][0];
        assert!(later.matches("seabios", "1.16.3-2~bpo12+1"));
        assert!(!later.matches("seabios", "1.16.2-1"));
    }
}
