//! The consent page and the OAuth error pages. The consent page names the client and where the
//! browser goes afterwards, asks the owner to sign in (passphrase or GitHub) unless already
//! signed in, and offers Approve and Deny. No scripts; never framed.

use super::clients::redirect_label;
use crate::authstore::api::{ClientKind, PendingRequest};
use crate::error::{Error, ErrorKind, Result};
use crate::html;
use maud::html;
use worker::Response;

/// What the consent page needs beyond the request.
pub struct ConsentView<'a> {
    pub pending: &'a PendingRequest,
    pub csrf: &'a str,
    /// Who is signed in on this browser, if anyone.
    pub owner: Option<&'a str>,
    pub passphrase_enabled: bool,
    pub github_enabled: bool,
    /// A problem with the last attempt (wrong passphrase, …).
    pub problem: Option<&'a str>,
}

pub fn page(view: &ConsentView) -> String {
    let request = &view.pending.request;
    let body = html! {
        @if let Some(problem) = view.problem {
            p.error role="alert" { (problem) }
        }
        div.box {
            p {
                strong { (request.client_name) }
                " wants to use this handoff deployment: start coding runs, use sandboxes and read \
                 their results, as you."
            }
            p.muted {
                @match request.client_kind {
                    ClientKind::Registered => {
                        "This name was chosen by the app itself when it registered. Approve only \
                         if you just asked an app to connect to handoff."
                    }
                    ClientKind::Document => { "Its details are published at " (request.client_id) "." }
                }
            }
            p {
                "After you decide, your browser goes back to "
                strong { (redirect_label(&request.redirect_uri)) }
                "."
            }
        }
        form method="post" action="/oauth/consent" {
            input type="hidden" name="request" value=(view.pending.id);
            input type="hidden" name="csrf" value=(view.csrf);
            @if let Some(owner) = view.owner {
                p.muted { "Signed in as the owner (" (owner) ")." }
            } @else if view.passphrase_enabled {
                label for="passphrase" { "Owner passphrase" }
                input type="password" id="passphrase" name="passphrase"
                    autocomplete="current-password" required autofocus;
            }
            @if view.owner.is_some() || view.passphrase_enabled {
                button.primary type="submit" name="decision" value="approve" { "Approve" }
            }
            button type="submit" name="decision" value="deny" formnovalidate { "Deny" }
        }
        @if view.owner.is_none() && view.github_enabled {
            p { a.button href={ "/oauth/github?request=" (view.pending.id) } { "Sign in with GitHub" } }
        }
    };
    html::document(
        &format!("Allow {} to use handoff?", request.client_name),
        html! {},
        body,
    )
}

/// An error page for problems that cannot be sent back to the client (unknown client, bad
/// redirect URI, expired request, …).
pub fn error_page(status: u16, title: &str, message: &str) -> Result<Response> {
    html::respond(status, &html::message(title, message))
}

/// The page for an OAuth store refusal: an expired or answered request (404), a rate limit
/// (429 with `Retry-After`); anything else is passed on.
pub fn store_problem(e: &Error) -> Result<Response> {
    match e.kind {
        ErrorKind::NotFound => error_page(404, "Request expired", &e.message),
        ErrorKind::RateLimited => {
            let mut response = error_page(429, "Too many attempts", &e.message)?;
            let retry = e.retry_after_secs.unwrap_or(60).to_string();
            response.headers_mut().set("retry-after", &retry)?;
            Ok(response)
        }
        _ => Err(e.clone()),
    }
}
