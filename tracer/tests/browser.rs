//! The report pages in a real browser: `index.html` of the committed 5.10 sweep and the compare
//! page of two kernels are loaded over `file://` by Debian's `chromium-headless-shell`
//! (installed by `cargo xtask setup`). Checks that every image, embedded object and link of the
//! rendered DOM resolves relative to the page, that no script error reaches the console, that
//! the page reads in order (summary, plots, per-target tables), and that a screenshot is a real
//! picture. A control page with a deliberate script error and a missing image proves the
//! checks can fail.
//!
//! `TRACER_UPDATE_SCREENSHOT=1` rewrites `tracer/docs/report-5.10.png`, the README's picture:
//! the report of a real recording (`vm-5.10-waitpid-6000`, Debian's 5.10 kernel under qemu).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tracer::render::{ReportOptions, check_well_formed};

const BROWSER: &str = "chromium-headless-shell";
const TIMEOUT: Duration = Duration::from_secs(120);

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The browser on PATH; a missing browser is a failed precondition, never a skip.
fn browser() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(BROWSER))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "{BROWSER} is not on PATH: this test loads the report in a real browser; \
                 install it with `cargo xtask setup` (Debian package {BROWSER})"
            )
        })
}

/// What the browser gave back for one page.
struct Loaded {
    /// The DOM after loading (`--dump-dom`).
    dom: String,
    /// The browser's log, with the page's console messages.
    log: String,
}

/// Runs the browser on `page` with `extra` arguments; kills it and panics after [`TIMEOUT`].
fn run_browser(page: &Path, profile: &Path, extra: &[String]) -> (String, String) {
    let url = format!("file://{}", page.display());
    let mut child = Command::new(browser())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(&url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {BROWSER}: {e}"));
    // Read both pipes on threads so a full pipe never stalls the browser.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).map(|_| s)
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).map(|_| s)
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{BROWSER} did not finish loading {url} in {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (out, err) = (
        t_out.join().unwrap().unwrap(),
        t_err.join().unwrap().unwrap(),
    );
    assert!(status.success(), "{BROWSER} on {url}: {status}\n{err}");
    (out, err)
}

fn load(page: &Path, tmp: &Path) -> Loaded {
    let (dom, log) = run_browser(page, &tmp.join("profile"), &["--dump-dom".to_string()]);
    assert!(
        dom.contains("</html>"),
        "no DOM for {}:\n{log}",
        page.display()
    );
    Loaded { dom, log }
}

/// Console messages in the browser's log: Chromium logs each as `...:CONSOLE:<line>] "text"`
/// (`CONSOLE(<line>)` in older versions), uncaught exceptions as `"Uncaught ..."`.
fn console_messages(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .collect()
}

fn unescape(s: &str) -> String {
    let s = s
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    // %XX escapes (the report writes none, but a browser may add them).
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

/// (tag, attribute, value) of every `<img src>`, `<object data>` and `<a href>` in the DOM.
fn references(dom: &str) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let mut rest = dom;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        let end = rest.find('>').unwrap_or(rest.len());
        let tag = &rest[..end];
        let name = tag.split_whitespace().next().unwrap_or("");
        let attr = match name {
            "img" => "src",
            "object" => "data",
            "a" => "href",
            _ => continue,
        };
        let pat = format!(" {attr}=\"");
        if let Some(j) = tag.find(&pat) {
            let v = &tag[j + pat.len()..];
            let v = &v[..v.find('"').unwrap()];
            out.push((attr_tag(name), unescape(v)));
        } else if name != "a" {
            panic!("<{tag}> without {attr}");
        }
    }
    out
}

fn attr_tag(name: &str) -> &'static str {
    match name {
        "img" => "img",
        "object" => "object",
        _ => "a",
    }
}

/// Problems of a loaded page: references that do not resolve, console messages.
fn problems(page: &Path, l: &Loaded) -> Vec<String> {
    let dir = page.parent().unwrap();
    let mut out = Vec::new();
    for (tag, target) in references(&l.dom) {
        if let Some(id) = target.strip_prefix('#') {
            if !l.dom.contains(&format!("id=\"{id}\"")) {
                out.push(format!("<{tag}> {target}: no element with that id"));
            }
            continue;
        }
        if target.contains("://") || target.starts_with('/') {
            out.push(format!("<{tag}> {target}: not relative to the page"));
            continue;
        }
        let path = dir.join(target.split('#').next().unwrap());
        if !path.is_file() {
            out.push(format!(
                "<{tag}> {target}: {} does not exist",
                path.display()
            ));
        } else if tag != "a" && path.extension().is_some_and(|e| e == "svg") {
            let text = std::fs::read_to_string(&path).unwrap();
            if let Err(e) = check_well_formed(&text) {
                out.push(format!("<{tag}> {target}: not well-formed: {e}"));
            }
        }
    }
    out.extend(
        console_messages(&l.log)
            .into_iter()
            .map(|m| format!("console: {m}")),
    );
    out
}

fn assert_clean(page: &Path, l: &Loaded) {
    let p = problems(page, l);
    assert!(
        p.is_empty(),
        "{} in the browser:\n{}",
        page.display(),
        p.join("\n")
    );
}

fn count(dom: &str, tag: &str, attr_prefix: &str) -> usize {
    references(dom)
        .iter()
        .filter(|(t, v)| *t == tag && v.starts_with(attr_prefix))
        .count()
}

/// A PNG of `w`×`h` pixels (its IHDR), of at least `min_bytes`.
fn assert_png(path: &Path, w: u32, h: u32, min_bytes: usize) {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        &b[..8],
        b"\x89PNG\r\n\x1a\n",
        "{}: not a PNG",
        path.display()
    );
    assert_eq!(&b[12..16], b"IHDR");
    let be = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().unwrap());
    assert_eq!((be(16), be(20)), (w, h), "{}: size", path.display());
    // A blank page compresses to a few kilobytes; tables, plots and flamegraphs do not.
    assert!(
        b.len() >= min_bytes,
        "{}: {} bytes, a nearly empty picture",
        path.display(),
        b.len()
    );
}

fn screenshot(page: &Path, tmp: &Path, png: &Path) {
    run_browser(
        page,
        &tmp.join("profile-shot"),
        &[
            format!("--screenshot={}", png.display()),
            "--window-size=1280,2000".to_string(),
        ],
    );
    assert_png(png, 1280, 2000, 60_000);
}

#[test]
fn the_checks_catch_a_script_error_and_a_missing_image() {
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("broken.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><body><p id=\"x\">x</p><img src=\"missing.svg\">\
         <a href=\"#nowhere\">a</a><a href=\"#x\">b</a>\
         <script>notDefined();</script></body></html>",
    )
    .unwrap();
    let l = load(&page, tmp.path());
    let p = problems(&page, &l);
    assert!(
        p.iter()
            .any(|m| m.starts_with("console:") && m.contains("notDefined")),
        "the script error was not seen: {p:?}\n{}",
        l.log
    );
    assert!(
        p.iter().any(|m| m.contains("missing.svg")),
        "missing image not seen: {p:?}"
    );
    assert!(p.iter().any(|m| m.contains("#nowhere")), "{p:?}");
    assert!(!p.iter().any(|m| m.contains("#x:")), "{p:?}");
    assert_eq!(p.len(), 3, "{p:?}");
}

#[test]
fn report_of_the_5_10_sweep_in_a_browser() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("report");
    tracer::pipeline::report(&fixture("sweep-5.10"), &out, &ReportOptions::default()).unwrap();
    let page = out.join("index.html");
    let l = load(&page, tmp.path());
    assert_clean(&page, &l);

    // Reading order: the summary table, the plots, then the per-target tables.
    let at = |needle: &str| {
        l.dom
            .find(needle)
            .unwrap_or_else(|| panic!("no {needle} in the page"))
    };
    assert!(at("id=\"summary\"") < at("id=\"plots\""));
    assert!(at("id=\"plots\"") < at("class=\"num\""));
    assert!(at("id=\"plots\"") < at("id=\"findings\""));
    // The summary names the culprit of do_wait's growth and links its differential.
    let summary = &l.dom[at("id=\"summary\"")..at("id=\"plots\"")];
    assert!(summary.contains("wait_consider_task"), "{summary}");
    assert!(summary.contains("O(n)"), "{summary}");
    assert!(summary.contains("diff-n10-n8000.svg"), "{summary}");
    // Both plots and the flamegraphs are images on the page; the differential of each group
    // comes before its per-N flamegraphs.
    assert!(count(&l.dom, "img", "plots/") >= 2);
    let flames: Vec<String> = references(&l.dom)
        .into_iter()
        .filter(|(t, v)| *t == "img" && v.starts_with("flamegraphs/"))
        .map(|(_, v)| v)
        .collect();
    assert!(flames.len() >= 4, "{flames:?}");
    assert!(flames[0].contains("/diff-n"), "{flames:?}");
    // No monospace walls: verdict lines are text, not code.
    assert!(!l.dom.contains("<code>do_wait [waitpid-pid]"));

    screenshot(&page, tmp.path(), &tmp.path().join("report.png"));
}

#[test]
fn report_of_a_real_5_10_recording_in_a_browser() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("report");
    // Relative to the package (cargo's working directory for tests), so the page's "Data:"
    // line in the README's screenshot names the fixture, not this machine's checkout.
    let data = Path::new("tests/fixtures/vm-5.10-waitpid-6000");
    assert!(
        data.is_dir(),
        "run from the tracer package directory (cargo test does)"
    );
    tracer::pipeline::report(data, &out, &ReportOptions::default()).unwrap();
    let page = out.join("index.html");
    let l = load(&page, tmp.path());
    assert_clean(&page, &l);
    let summary =
        &l.dom[l.dom.find("id=\"summary\"").unwrap()..l.dom.find("id=\"plots\"").unwrap()];
    assert!(
        summary.contains("wait_consider_task (self)") && summary.contains("O(n)"),
        "{summary}"
    );
    let png = tmp.path().join("report.png");
    screenshot(&page, tmp.path(), &png);
    if std::env::var_os("TRACER_UPDATE_SCREENSHOT").is_some() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/report-5.10.png");
        std::fs::create_dir_all(docs.parent().unwrap()).unwrap();
        std::fs::copy(&png, &docs).unwrap();
    }
}

#[test]
fn compare_page_in_a_browser() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cmp");
    tracer::pipeline::compare(
        &fixture("vm-5.10-waitpid"),
        &fixture("vm-6.1-waitpid"),
        &out,
        &ReportOptions::default(),
    )
    .unwrap();
    for page in ["index.html", "a/index.html", "b/index.html"] {
        let page = out.join(page);
        let l = load(&page, tmp.path());
        assert_clean(&page, &l);
        if page == out.join("index.html") {
            // The cross-kernel differential of do_wait at the largest common N (2000).
            let diffs: Vec<String> = references(&l.dom)
                .into_iter()
                .filter(|(t, v)| *t == "img" && v.contains("/diff-a-b-n"))
                .map(|(_, v)| v)
                .collect();
            assert_eq!(
                diffs,
                ["flamegraphs/oncpu/do_wait/waitpid-pid/diff-a-b-n2000.svg"],
                "cross-kernel differentials"
            );
            let svg = std::fs::read_to_string(out.join(&diffs[0])).unwrap();
            assert!(svg.contains("5.10.0-32-cloud-amd64 → 6.1.0-50-cloud-amd64"));
            // The stacks meet below do_wait although 6.1 adds a __do_sys_wait4 frame above
            // it: the walk over the children list loses its share on 6.1 and is drawn blue.
            let walk = &svg[svg
                .find("<title>wait_consider_task (")
                .expect("wait_consider_task in the cross-kernel differential")..];
            let walk = &walk[..walk.find("/>").unwrap()];
            assert!(walk.contains("%; -"), "{walk}");
            assert!(walk.contains(",255)\""), "not blue: {walk}");
            assert!(l.dom.contains("O(n^2) → O(1)"), "summary class change");
            screenshot(&page, tmp.path(), &tmp.path().join("compare.png"));
        }
    }
}
