//! Who is looking at a page: the deployment's owner signed in on this browser, or someone with
//! a signed link (`?token=…`, handed to the MCP client). Anyone else is sent to sign in; a link
//! that does not verify gets a page saying so.

use crate::error::{ErrorKind, Result};
use crate::html;
use crate::http;
use crate::links;
use crate::oauth;
use worker::{Env, Request, Response};

pub enum Viewer {
    /// The owner, by the name their sign-in carries.
    Owner(String),
    /// A signed link's token.
    Link(String),
}

impl Viewer {
    pub fn owner(&self) -> Option<&str> {
        match self {
            Viewer::Owner(name) => Some(name),
            Viewer::Link(_) => None,
        }
    }

    /// The query that carries the viewer's access to another of the run's pages.
    pub fn query(&self) -> String {
        match self {
            Viewer::Owner(_) => String::new(),
            Viewer::Link(token) => format!("?token={}", http::query_value(token)),
        }
    }
}

/// What a page is for: a run, or a work session.
pub enum Subject<'a> {
    Run(&'a str),
    Session(&'a str),
}

/// The viewer of `subject`, or the response for someone who may not see it.
pub fn viewer(env: &Env, req: &Request, subject: Subject<'_>) -> Result<Result<Viewer, Response>> {
    if let Some(owner) = oauth::signed_in_owner(env, req) {
        return Ok(Ok(Viewer::Owner(owner)));
    }
    let url = req.url()?;
    let token = url
        .query_pairs()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned());
    let Some(token) = token else {
        return Ok(Err(sign_in(&req.path())?));
    };
    let checked = match subject {
        Subject::Run(id) => links::verify_run_page_token(env, id, &token),
        Subject::Session(id) => links::verify_session_page_token(env, id, &token),
    };
    match checked {
        Ok(()) => Ok(Ok(Viewer::Link(token))),
        Err(e) => {
            let status = if e.kind == ErrorKind::NotConfigured {
                503
            } else {
                404
            };
            Ok(Err(html::respond(
                status,
                &html::message("Link not valid", &e.message),
            )?))
        }
    }
}

/// Sends a browser without a signed link to the owner's sign-in, and back here afterwards.
pub(super) fn sign_in(path: &str) -> Result<Response> {
    let headers = worker::Headers::new();
    headers.set("location", &oauth::sign_in_url(path))?;
    headers.set("cache-control", "no-store")?;
    Ok(Response::empty()?.with_status(302).with_headers(headers))
}
