//! Content negotiation of the OpenAPI documents, as kube-openapi's handlers
//! (`pkg/handler` for v2, `pkg/handler3` for v3) do it with goautoneg: the
//! Accept clauses are ordered by quality, then specificity (`*` after a
//! concrete type or subtype), the first clause that matches an offered form
//! wins, and nothing matching is 406.
//!
//! The protobuf forms are asked for in two spellings: client-go and kubectl
//! send the historical `...spec.v2@v1.0+protobuf`, kube-openapi also accepts
//! `...spec.v2.v1.0+protobuf`, and it answers both with the latter. The `@`
//! one must never go back in a Content-Type: Go's `mime.ParseMediaType`
//! (which client-go runs on every response) rejects `@` in a subtype since
//! Go 1.22, so kubectl would fail with "mime: unexpected content after media
//! subtype".

/// Which representation of a document to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// JSON (`application/json`).
    Json,
    /// gnostic protobuf.
    Protobuf,
}

/// An OpenAPI version's offered media types, in kube-openapi's order.
pub struct Offers {
    /// `(subtype under application/, form)`, JSON first.
    subtypes: [(&'static str, Form); 3],
    /// What a protobuf answer is labelled with.
    pub protobuf_content_type: &'static str,
}

/// `/openapi/v2`.
pub const V2: Offers = Offers {
    subtypes: [
        ("json", Form::Json),
        ("com.github.proto-openapi.spec.v2@v1.0+protobuf", Form::Protobuf),
        ("com.github.proto-openapi.spec.v2.v1.0+protobuf", Form::Protobuf),
    ],
    protobuf_content_type: "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
};

/// `/openapi/v3/{group-version}`.
pub const V3: Offers = Offers {
    subtypes: [
        ("json", Form::Json),
        ("com.github.proto-openapi.spec.v3.v1.0+protobuf", Form::Protobuf),
        ("com.github.proto-openapi.spec.v3@v1.0+protobuf", Form::Protobuf),
    ],
    protobuf_content_type: "application/com.github.proto-openapi.spec.v3.v1.0+protobuf",
};

impl Offers {
    /// The Content-Type of a form.
    pub fn content_type(&self, form: Form) -> &'static str {
        match form {
            Form::Json => "application/json",
            Form::Protobuf => self.protobuf_content_type,
        }
    }
}

/// One Accept clause.
struct Clause<'a> {
    ty: &'a str,
    subtype: &'a str,
    q: f64,
}

/// Parses an Accept header the way goautoneg does: clauses without a `/`
/// (other than `*`) or with two are skipped, `q` defaults to 1, and a
/// malformed `q` counts as 0.
fn clauses(accept: &str) -> Vec<Clause<'_>> {
    let mut out = Vec::new();
    for part in accept.split(',') {
        let mut params = part.split(';');
        let media = params.next().unwrap_or_default().trim();
        let (ty, subtype) = match media.split_once('/') {
            None if media == "*" => ("*", "*"),
            None => continue,
            Some((_, s)) if s.contains('/') => continue,
            Some((t, s)) => (t.trim(), s.trim()),
        };
        let mut q = 1.0;
        for p in params {
            if let Some((k, v)) = p.split_once('=') {
                if k.trim() == "q" && !v.contains('=') {
                    q = v.trim().parse().unwrap_or(0.0);
                }
            }
        }
        out.push(Clause { ty, subtype, q });
    }
    // Stable: among equals the header's order decides.
    out.sort_by(|a, b| {
        b.q.total_cmp(&a.q).then((a.ty == "*").cmp(&(b.ty == "*"))).then((a.subtype == "*").cmp(&(b.subtype == "*")))
    });
    out
}

/// The form to answer `accept` with among those `available`, or `None` for
/// 406. An empty header means `*/*`.
pub fn negotiate(offers: &Offers, accept: &str, available: &[Form]) -> Option<Form> {
    let accept = if accept.trim().is_empty() { "*/*" } else { accept };
    for c in clauses(accept) {
        for (subtype, form) in offers.subtypes {
            let type_ok = c.ty == "*" || c.ty.eq_ignore_ascii_case("application");
            let subtype_ok = c.subtype == "*" || c.subtype.eq_ignore_ascii_case(subtype);
            if type_ok && subtype_ok && available.contains(&form) {
                return Some(form);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOTH: &[Form] = &[Form::Json, Form::Protobuf];

    #[test]
    fn v2_protobuf_in_both_spellings_is_answered_with_the_dotted_type() {
        // What client-go's discovery client sends for /openapi/v2.
        let f = negotiate(&V2, "application/com.github.proto-openapi.spec.v2@v1.0+protobuf", BOTH);
        assert_eq!(f, Some(Form::Protobuf));
        let f2 = negotiate(&V2, "application/com.github.proto-openapi.spec.v2.v1.0+protobuf", BOTH);
        assert_eq!(f2, Some(Form::Protobuf));
        let ct = V2.content_type(Form::Protobuf);
        assert_eq!(ct, "application/com.github.proto-openapi.spec.v2.v1.0+protobuf");
        // What Go's mime.ParseMediaType requires of a subtype: RFC 7230 token characters only.
        let subtype = ct.split_once('/').unwrap().1;
        assert!(subtype.chars().all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)), "{ct}");
    }

    #[test]
    fn v3_protobuf_in_both_spellings_is_recognised() {
        for accept in [
            "application/com.github.proto-openapi.spec.v3@v1.0+protobuf",
            "application/com.github.proto-openapi.spec.v3.v1.0+protobuf",
        ] {
            assert_eq!(negotiate(&V3, accept, BOTH), Some(Form::Protobuf), "{accept}");
            // Without a protobuf form to give, a protobuf-only request is 406, as
            // kube-openapi answers anything it cannot serve.
            assert_eq!(negotiate(&V3, accept, &[Form::Json]), None, "{accept}");
        }
        assert_eq!(
            negotiate(
                &V3,
                "application/com.github.proto-openapi.spec.v3@v1.0+protobuf, application/json",
                &[Form::Json]
            ),
            Some(Form::Json)
        );
    }

    #[test]
    fn order_quality_and_wildcards() {
        assert_eq!(negotiate(&V2, "", BOTH), Some(Form::Json), "no header is */*");
        assert_eq!(negotiate(&V2, "*/*", BOTH), Some(Form::Json));
        assert_eq!(negotiate(&V2, "application/*", BOTH), Some(Form::Json));
        assert_eq!(negotiate(&V2, "application/json", BOTH), Some(Form::Json));
        let pb_then_json = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf, application/json";
        assert_eq!(negotiate(&V2, pb_then_json, BOTH), Some(Form::Protobuf));
        let low_pb = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf;q=0.5, application/json";
        assert_eq!(negotiate(&V2, low_pb, BOTH), Some(Form::Json), "higher quality first");
        let wild_first = "*/*, application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
        assert_eq!(negotiate(&V2, wild_first, BOTH), Some(Form::Protobuf), "a concrete type outranks */*");
        assert_eq!(negotiate(&V2, "application/yaml", BOTH), None);
        assert_eq!(negotiate(&V2, "text/html, application/vnd.kubernetes.protobuf", BOTH), None);
    }
}
