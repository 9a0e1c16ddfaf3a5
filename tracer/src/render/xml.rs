//! XML helpers: escaping for hand-written SVG/HTML, and a small well-formedness check that every
//! SVG passes before it is renamed into place (and that tests use).

/// Escape text for XML/HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Check that `doc` is a well-formed XML document: one root element, properly nested and
/// matching tags, quoted unique attributes, valid entity and character references, and no raw
/// `<` or `&` in text. Comments, CDATA, processing instructions and a DOCTYPE (without an
/// internal subset) are accepted. Returns the root element's name, or what was wrong and at
/// which byte offset.
pub fn check_well_formed(doc: &str) -> Result<String, String> {
    let b = doc.as_bytes();
    let mut i = 0;
    let mut stack: Vec<&str> = Vec::new();
    let mut root: Option<String> = None;
    let err = |at: usize, what: &str| Err(format!("{what} at byte {at}"));
    while i < b.len() {
        if b[i] != b'<' {
            // Text.
            let end = doc[i..].find('<').map_or(b.len(), |k| i + k);
            let text = &doc[i..end];
            if stack.is_empty() && !text.trim().is_empty() {
                return err(i, "text outside the root element");
            }
            if text.contains("]]>") {
                return err(i, "']]>' in text");
            }
            check_refs(text).map_err(|w| format!("{w} at byte {i}"))?;
            i = end;
            continue;
        }
        let rest = &doc[i..];
        if let Some(body) = rest.strip_prefix("<!--") {
            let Some(k) = body.find("-->") else {
                return err(i, "unterminated comment");
            };
            if body[..k].contains("--") {
                return err(i, "'--' inside a comment");
            }
            i += 4 + k + 3;
        } else if rest.starts_with("<![CDATA[") {
            if stack.is_empty() {
                return err(i, "CDATA outside the root element");
            }
            let Some(k) = rest.find("]]>") else {
                return err(i, "unterminated CDATA");
            };
            i += k + 3;
        } else if rest.starts_with("<?") {
            let Some(k) = rest.find("?>") else {
                return err(i, "unterminated processing instruction");
            };
            i += k + 2;
        } else if rest.starts_with("<!DOCTYPE") {
            if root.is_some() || !stack.is_empty() {
                return err(i, "DOCTYPE after the root element");
            }
            let Some(k) = rest.find('>') else {
                return err(i, "unterminated DOCTYPE");
            };
            if rest[..k].contains('[') {
                return err(i, "DOCTYPE internal subsets are not supported");
            }
            i += k + 1;
        } else if let Some(r) = rest.strip_prefix("</") {
            let name_len = name_len_of(r);
            if name_len == 0 {
                return err(i, "end tag without a name");
            }
            let name = &r[..name_len];
            let after = r[name_len..].trim_start();
            if !after.starts_with('>') {
                return err(i, "malformed end tag");
            }
            match stack.pop() {
                Some(open) if open == name => {}
                Some(open) => return err(i, &format!("</{name}> closes <{open}>")),
                None => return err(i, &format!("</{name}> without a start tag")),
            }
            i += 2 + name_len + (r[name_len..].len() - after.len()) + 1;
        } else {
            let r = &rest[1..];
            let name_len = name_len_of(r);
            if name_len == 0 {
                return err(i, "'<' not starting a tag");
            }
            let name = &r[..name_len];
            if stack.is_empty() {
                if root.is_some() {
                    return err(i, "second root element");
                }
                root = Some(name.to_string());
            }
            let (j, open) = start_tag(rest, i, name_len)?;
            if open {
                stack.push(name);
            }
            i += j;
        }
    }
    if let Some(open) = stack.last() {
        return Err(format!("<{open}> is never closed"));
    }
    root.ok_or_else(|| "no root element".to_string())
}

/// The length of the start tag at the head of `rest` (at byte `at` of the document, its
/// name `name_len` bytes after the `<`), its attributes checked, and whether it opens an
/// element (`>`) rather than closing itself (`/>`).
fn start_tag(rest: &str, at: usize, name_len: usize) -> Result<(usize, bool), String> {
    let mut j = 1 + name_len;
    let mut seen: Vec<&str> = Vec::new();
    loop {
        let ws = rest[j..].len() - rest[j..].trim_start().len();
        j += ws;
        let t = &rest[j..];
        if t.starts_with("/>") {
            return Ok((j + 2, false));
        }
        if t.starts_with('>') {
            return Ok((j + 1, true));
        }
        if t.is_empty() {
            return Err(at_byte(at, "unterminated start tag"));
        }
        if ws == 0 {
            return Err(at_byte(at + j, "missing space before attribute"));
        }
        let an = name_len_of(t);
        if an == 0 {
            return Err(at_byte(at + j, "malformed attribute"));
        }
        let aname = &t[..an];
        if seen.contains(&aname) {
            return Err(at_byte(at + j, &format!("duplicate attribute {aname}")));
        }
        seen.push(aname);
        let t2 = t[an..].trim_start();
        let Some(t3) = t2.strip_prefix('=') else {
            return Err(at_byte(at + j, "attribute without value"));
        };
        let t3 = t3.trim_start();
        let q = t3.chars().next().unwrap_or(' ');
        if q != '"' && q != '\'' {
            return Err(at_byte(at + j, "unquoted attribute value"));
        }
        let Some(vlen) = t3[1..].find(q) else {
            return Err(at_byte(at + j, "unterminated attribute value"));
        };
        let value = &t3[1..1 + vlen];
        if value.contains('<') {
            return Err(at_byte(at + j, "'<' in attribute value"));
        }
        check_refs(value).map_err(|w| at_byte(at + j, &w))?;
        let consumed = t.len() - t3.len() + 1 + vlen + 1;
        j += consumed;
    }
}

fn at_byte(at: usize, what: &str) -> String {
    format!("{what} at byte {at}")
}

fn is_name_char(c: char, first: bool) -> bool {
    c.is_alphabetic()
        || c == '_'
        || c == ':'
        || (!first && (c.is_ascii_digit() || c == '-' || c == '.'))
}

fn name_len_of(s: &str) -> usize {
    let mut n = 0;
    for (k, c) in s.char_indices() {
        if !is_name_char(c, k == 0) {
            break;
        }
        n = k + c.len_utf8();
    }
    n
}

/// Every `&` must start `&name;` for a predefined entity or a character reference.
fn check_refs(s: &str) -> Result<(), String> {
    let mut rest = s;
    while let Some(k) = rest.find('&') {
        let after = &rest[k + 1..];
        let Some(end) = after.find(';') else {
            return Err("'&' without ';'".into());
        };
        let r = &after[..end];
        let ok = match r {
            "amp" | "lt" | "gt" | "quot" | "apos" => true,
            _ => {
                if let Some(hex) = r.strip_prefix("#x") {
                    !hex.is_empty()
                        && u32::from_str_radix(hex, 16)
                            .ok()
                            .and_then(char::from_u32)
                            .is_some()
                } else if let Some(dec) = r.strip_prefix('#') {
                    !dec.is_empty() && dec.parse::<u32>().ok().and_then(char::from_u32).is_some()
                } else {
                    false
                }
            }
        };
        if !ok {
            return Err(format!("bad reference &{r};"));
        }
        rest = &after[end + 1..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_well_formed() {
        let doc = r#"<?xml version="1.0" standalone="no"?>
<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">
<svg xmlns="http://www.w3.org/2000/svg" width='10'><!-- c --><script><![CDATA[ if (a < b && c) {} ]]></script>
<g class="x"><text x="1">a &amp; b &#955; &#x3bb;</text><rect/></g></svg>
"#;
        assert_eq!(check_well_formed(doc), Ok("svg".to_string()));
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
        assert!(check_well_formed(&format!("<t>{}</t>", escape("<&>\"'"))).is_ok());
    }

    #[test]
    fn rejects_malformed() {
        for (doc, what) in [
            ("<svg><g></svg>", "closes"),
            ("<svg>", "never closed"),
            ("<svg></svg><svg></svg>", "second root"),
            ("<svg>a < b</svg>", "not starting a tag"),
            ("<svg>a & b</svg>", "'&'"),
            ("<svg>&nbsp;</svg>", "bad reference"),
            ("<svg a=1></svg>", "unquoted"),
            ("<svg a=\"1\" a=\"2\"></svg>", "duplicate"),
            ("<svg a=\"1\"b=\"2\"></svg>", "missing space"),
            ("<svg a=\"x<y\"></svg>", "'<' in attribute"),
            ("", "no root"),
            ("<svg></svg>trailing", "outside the root"),
            ("<svg><!-- a -- b --></svg>", "'--'"),
            ("<svg></g>", "closes"),
        ] {
            let e = check_well_formed(doc).unwrap_err();
            assert!(e.contains(what), "{doc:?}: {e}");
        }
    }
}
