//! The report as one self-contained web page (`--html FILE`, and
//! `report.html` of `mpiq run --report DIR`): the JSON report (the same
//! facts `--format json` prints, never a second analysis) and the text
//! report embedded in a page whose script draws the verdict, the wait-for
//! graph, the merged stacks as a tree, each rank's detail and the flight
//! recorder's last calls. The page loads nothing: its style and script are
//! in it, and its Content-Security-Policy forbids any request, so it works
//! from `file://`, as a CI artifact and offline.

use serde_json::Value;

const TEMPLATE: &str = include_str!("html/report.html");
const CSS: &str = include_str!("html/report.css");
const JS: &str = include_str!("html/report.js");

/// What the page is made of.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a> {
    /// The page's title and heading (the job and its size).
    pub title: &'a str,
    /// The JSON report as `--format json` renders it (the snapshot with its
    /// `analysis` and `stack_tree`).
    pub report_json: &'a str,
    /// The text report, shown folded at the end.
    pub text: &'a str,
    /// The command's exit status and what it means, when it has one.
    pub exit: Option<(u8, &'a str)>,
}

/// `s` escaped for HTML text and attribute values.
fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The data the page's script reads (`#mpiq-data`): `title`, `exit`
/// (`status`, `meaning`), `text` and `report`, with every `<` written
/// `\u003c` so that nothing in a name the target chose (a function, a
/// communicator, a path) can end the script element.
pub fn data_json(page: &Page<'_>) -> String {
    let exit = match page.exit {
        Some((status, meaning)) => serde_json::json!({ "status": status, "meaning": meaning }),
        None => Value::Null,
    };
    // The report is embedded as it was rendered (parsing and writing it
    // again would cost a 16,000-rank report's time twice); when it is not
    // JSON (a renderer's error), as `null` with the text still shown.
    let report = page.report_json.trim();
    let report = if report.starts_with('{') && serde_json::from_str::<serde::de::IgnoredAny>(report).is_ok() {
        report
    } else {
        "null"
    };
    let mut out = String::with_capacity(report.len() + page.text.len() + 256);
    out.push_str("{\"title\":");
    out.push_str(&Value::from(page.title).to_string());
    out.push_str(",\"exit\":");
    out.push_str(&exit.to_string());
    out.push_str(",\"text\":");
    out.push_str(&Value::from(page.text).to_string());
    out.push_str(",\"report\":");
    out.push_str(report);
    out.push('}');
    // In JSON a `<` is only ever inside a string, where `\u003c` means the
    // same.
    out.replace('<', "\\u003c")
}

/// The page: the template with its style, script, title and data filled
/// in, in one pass (nothing filled in is read again for a marker).
pub fn page(page: &Page<'_>) -> String {
    let data = data_json(page);
    let title = escape_html(page.title);
    let mut out = String::with_capacity(TEMPLATE.len() + CSS.len() + JS.len() + data.len());
    let mut rest = TEMPLATE;
    while let Some(at) = rest.find('@') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let filled = ["CSS", "JS", "TITLE", "DATA", "VERSION"].iter().find_map(|name| {
            after
                .strip_prefix(name)
                .and_then(|r| r.strip_prefix('@'))
                .map(|r| (*name, r))
        });
        match filled {
            Some((name, r)) => {
                out.push_str(match name {
                    "CSS" => CSS,
                    "JS" => JS,
                    "TITLE" => &title,
                    "DATA" => &data,
                    _ => env!("CARGO_PKG_VERSION"),
                });
                rest = r;
            }
            None => {
                out.push('@');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> String {
        serde_json::json!({
            "schema": "mpiq.snapshot/2",
            "processes": [{"world_rank": 0, "executable": "/a/x</script><b>", "communicators": []}],
            "analysis": {"verdict": "deadlock", "summary": "ranks 0-1 wait for each other", "cycles": [[0, 1]], "edges": []}
        })
        .to_string()
    }

    /// The `<script type="application/json">` element's content.
    fn embedded(html: &str) -> &str {
        let start = html.find("id=\"mpiq-data\">").expect("the data element") + "id=\"mpiq-data\">".len();
        let end = start + html[start..].find("</script>").expect("its end");
        &html[start..end]
    }

    #[test]
    fn the_page_is_self_contained_and_its_data_round_trips() {
        let report = sample();
        let html = page(&Page {
            title: "x & y: <4 ranks>",
            report_json: &report,
            text: "verdict: DEADLOCK </script>",
            exit: Some((3, "a deadlock was found")),
        });
        assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
        // Every marker filled, none left.
        for m in ["@CSS@", "@JS@", "@TITLE@", "@DATA@", "@VERSION@"] {
            assert!(!html.contains(m), "{m} left in the page");
        }
        assert!(html.contains("<title>x &amp; y: &lt;4 ranks&gt;</title>"), "{html}");
        // Nothing from elsewhere: no src=, href= to another document, @import or url().
        for bad in ["src=", "@import", "url(http", "http://", "https://", "<link"] {
            let hits: Vec<_> = html.match_indices(bad).collect();
            // The SVG namespace is a name, not a request.
            let allowed = hits
                .iter()
                .all(|(i, _)| html[*i..].starts_with("http://www.w3.org/2000/svg"));
            assert!(hits.is_empty() || allowed, "{bad} in the page");
        }
        assert!(html.contains("default-src 'none'"));
        // The data: no `<` in it at all, and the same facts back.
        let data = embedded(&html);
        assert!(!data.contains('<'), "{data}");
        let v: Value = serde_json::from_str(data).unwrap();
        let original: Value = serde_json::from_str(&report).unwrap();
        assert_eq!(v["report"], original);
        assert_eq!(v["text"], "verdict: DEADLOCK </script>");
        assert_eq!(v["exit"]["status"], 3);
        assert_eq!(v["title"], "x & y: <4 ranks>");
        // One script element of data, and the page's own script after it.
        assert_eq!(html.matches("</script>").count(), 2);
    }

    #[test]
    fn a_report_that_is_not_json_is_null_with_the_text_kept() {
        let data = data_json(&Page {
            title: "t",
            report_json: "cannot serialize",
            text: "the text",
            exit: None,
        });
        let v: Value = serde_json::from_str(&data).unwrap();
        assert!(v["report"].is_null() && v["exit"].is_null());
        assert_eq!(v["text"], "the text");
    }
}
