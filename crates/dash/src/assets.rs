//! The page's files, compiled into the binary so `cargo run` serves them with no build step; looked
//! up by the server's tokio threads.

/// (name, contents, content type) of every file the page loads.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "index.html",
        include_str!("../static/index.html"),
        "text/html; charset=utf-8",
    ),
    (
        "style.css",
        include_str!("../static/style.css"),
        "text/css; charset=utf-8",
    ),
    (
        "app.js",
        include_str!("../static/app.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "api.js",
        include_str!("../static/api.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "charts.js",
        include_str!("../static/charts.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "controls.js",
        include_str!("../static/controls.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "series.js",
        include_str!("../static/series.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "explain.js",
        include_str!("../static/explain.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "history.js",
        include_str!("../static/history.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "types.js",
        include_str!("../static/types.js"),
        "text/javascript; charset=utf-8",
    ),
];

/// The file called `name` and its content type; `None` for anything else (so no path ever
/// reaches the file system).
pub fn get(name: &str) -> Option<(&'static str, &'static str)> {
    ASSETS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, body, ty)| (*body, *ty))
}

/// Names of all embedded files.
pub fn names() -> impl Iterator<Item = &'static str> {
    ASSETS.iter().map(|(n, _, _)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_the_page_imports_is_embedded() {
        for (name, body, _) in ASSETS {
            if !name.ends_with(".js") && !name.ends_with(".html") {
                continue;
            }
            for part in body.split("./").skip(1) {
                let Some(end) = part.find(".js") else {
                    continue;
                };
                let imported = &part[..end + 3];
                if imported
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
                {
                    assert!(
                        get(imported).is_some(),
                        "{name} imports {imported}, which is not embedded"
                    );
                }
            }
        }
        assert!(get("../Cargo.toml").is_none());
        assert!(names().any(|n| n == "index.html"));
    }
}
