//! `/secrets`: the owner's page for the secrets sandboxes can have swapped into their HTTPS
//! requests. Only the owner, signed in, sees it; a value is typed here (or pasted), sealed at
//! rest and never shown again — no page, tool or log reads it back. Every change is a POST with
//! the sign-in cookie, a form token bound to the owner and the action, and a same-origin
//! `Origin`.

use super::access;
use super::actions::{checked, form_token, see_other};
use crate::error::{Error, Result};
use crate::html;
use crate::oauth;
use crate::registry::api::{
    self as registry, DeleteSandboxSecret, ListSandboxSecrets, SetSandboxSecret,
};
use crate::time::rfc3339;
use maud::html;
use worker::{Env, Request, Response};

/// What the forms' tokens are bound to (in place of a run id).
const SUBJECT: &str = "secrets";

/// `GET /secrets`.
pub async fn get(req: Request, env: &Env) -> Result<Response> {
    let Some(owner) = oauth::signed_in_owner(env, &req) else {
        return access::sign_in("/secrets");
    };
    let key =
        crate::config::signing_key(env).ok_or_else(|| Error::not_configured("no signing key"))?;
    let token = |action: &str| form_token(&key, &owner, SUBJECT, action);
    let secrets = registry::client(env)?.call(ListSandboxSecrets {}).await?;
    let body = html! {
        header { h1 { "Secrets for sandboxes" } }
        main {
            p { "A sandbox with a secret attached (" code { "sandbox_attach_secret" } ") holds a stand-in in the variable of its name; handoff's egress proxy swaps in the value in the headers of HTTPS requests to the hosts it was attached for. The value never enters a sandbox and is never shown again." }
            @if secrets.is_empty() {
                p { "No secrets yet." }
            } @else {
                table {
                    thead { tr { th { "Name" } th { "Set" } th { "" } } }
                    tbody {
                        @for s in &secrets {
                            tr {
                                td { code { (s.name) } }
                                td { time datetime=(rfc3339(s.updated_at)) { (rfc3339(s.updated_at)) } }
                                td {
                                    form method="post" action="/secrets/delete" {
                                        input type="hidden" name="token" value=(token("delete"));
                                        input type="hidden" name="name" value=(s.name);
                                        button.danger type="submit" { "Delete" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            h2 { "Add or replace a secret" }
            form method="post" action="/secrets/set" {
                label for="name" { "Name (a variable name, e.g. GITHUB_TOKEN)" }
                input #name name="name" required pattern="[A-Za-z_][A-Za-z0-9_]*" maxlength="128" autocomplete="off";
                label for="value" { "Value" }
                input #value name="value" type="password" required maxlength="16384" autocomplete="off";
                input type="hidden" name="token" value=(token("set"));
                button.primary type="submit" { "Save" }
            }
        }
    };
    html::respond(200, &html::document("Secrets", html! {}, body))
}

/// `POST /secrets/set` and `POST /secrets/delete`.
pub async fn post(mut req: Request, env: &Env) -> Result<Response> {
    let path = req.path();
    let action = path.trim_start_matches("/secrets/");
    if !["set", "delete"].contains(&action) {
        return Ok(crate::http::not_found(&path));
    }
    let form = match checked(&mut req, env, SUBJECT, action).await? {
        Ok(form) => form,
        Err(refused) => return Ok(refused),
    };
    let name = form.field("name").unwrap_or_default().trim().to_string();
    let client = registry::client(env)?;
    let outcome = match action {
        "set" => {
            let op = SetSandboxSecret {
                name,
                value: form.field("value").unwrap_or_default().to_string(),
                principal: format!("owner:{}", form.owner),
            };
            client.call(op).await.map(|_| ())
        }
        _ => client.call(DeleteSandboxSecret { name }).await.map(|_| ()),
    };
    match outcome {
        Ok(()) => see_other("/secrets"),
        Err(e) => html::respond(e.http_status(), &html::message("Not saved", &e.message)),
    }
}
