//! Sending one notice to one destination, once: a signed webhook's POST,
//! a chat hook's POST, or one recipient's e-mail.

use std::time::Duration;

use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, CertificateStore, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use serde::Serialize;

use super::config::{Channel, NotifyConfig, PageLinks, Security};
use super::notice::{Link, Notice};
use crate::signature::Secret;

/// How long one attempt may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(15);
/// The idempotency key's header on webhook deliveries.
pub const IDEMPOTENCY_HEADER: &str = "idempotency-key";

/// One place a notice goes: a channel, and for e-mail one recipient.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Destination {
    pub channel: usize,
    pub recipient: usize,
}

/// The channels, ready to send.
pub(crate) struct Channels {
    client: reqwest::Client,
    config: NotifyConfig,
    /// The page's secret, to sign links with (when the page is set).
    links: Option<(Secret, PageLinks)>,
    /// A transport per e-mail channel (`None` for the others).
    smtp: Vec<Option<AsyncSmtpTransport<Tokio1Executor>>>,
}

/// The signed webhook's body: the notice, and its link.
#[derive(Serialize)]
struct Delivery<'a> {
    #[serde(flatten)]
    notice: &'a Notice,
    #[serde(skip_serializing_if = "Option::is_none")]
    link: Option<&'a str>,
}

impl Channels {
    /// The channels of `config`; `page_secret` signs the page links (the
    /// secret `serve` uses) and is needed when the config sets `page`.
    pub fn new(config: NotifyConfig, page_secret: Option<Secret>) -> Result<Channels, String> {
        let links = match (&config.page, page_secret) {
            (Some(page), Some(secret)) => Some((secret, page.clone())),
            (Some(_), None) => {
                return Err(
                    "the config sets page: the page's secret file (--secret-file) signs its links"
                        .into(),
                );
            }
            (None, _) => None,
        };
        let client = reqwest::Client::builder()
            .timeout(ATTEMPT_TIMEOUT)
            // A redirect would carry a signed body, or a link, elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        let smtp = config
            .channels
            .iter()
            .map(|c| match c {
                Channel::Email(e) => smtp_transport(e).map(Some),
                _ => Ok(None),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Channels {
            client,
            config,
            links,
            smtp,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &NotifyConfig {
        &self.config
    }

    /// Every destination, in the config's order.
    pub fn destinations(&self) -> Vec<Destination> {
        let mut all = Vec::with_capacity(self.config.destinations());
        for (channel, c) in self.config.channels.iter().enumerate() {
            let recipients = match c {
                Channel::Email(e) => e.to.len(),
                _ => 1,
            };
            all.extend((0..recipients).map(|recipient| Destination { channel, recipient }));
        }
        all
    }

    /// How a destination is named in messages: never a chat hook's URL
    /// (a credential), never a webhook's query.
    pub fn name(&self, d: Destination) -> String {
        match self.config.channels.get(d.channel) {
            Some(Channel::Webhook(w)) => format!(
                "webhook #{} ({})",
                d.channel,
                w.url.host_str().unwrap_or_default()
            ),
            Some(Channel::Chat(c)) => format!(
                "chat #{} ({})",
                d.channel,
                c.url.host_str().unwrap_or_default()
            ),
            Some(Channel::Email(e)) => format!(
                "email #{} to {}",
                d.channel,
                e.to.get(d.recipient)
                    .map(|m| m.email.to_string())
                    .unwrap_or_default()
            ),
            None => format!("#{}", d.channel),
        }
    }

    /// A fresh one-time link to the notice's run for `by`, when the page
    /// is set and the notice is about an approval.
    fn link(&self, notice: &Notice, by: &str) -> Result<Option<Link>, String> {
        let (Some((secret, page)), Some(_)) = (&self.links, &notice.approval) else {
            return Ok(None);
        };
        let url = crate::serve::mint_login_link(secret, &page.base, by, &notice.run_id, page.ttl)
            .map_err(|e| format!("no randomness for the link: {e}"))?;
        Ok(Some(Link {
            url,
            minutes: page.ttl.as_secs() / 60,
        }))
    }

    /// One attempt at delivering `notice` to `d`: `Err` says why it did
    /// not arrive (the caller tries again).
    pub async fn send(&self, d: Destination, notice: &Notice) -> Result<(), String> {
        match self.config.channels.get(d.channel) {
            Some(Channel::Webhook(w)) => {
                let link = self.link(notice, &w.link_as)?;
                let body = serde_json::to_vec(&Delivery {
                    notice,
                    link: link.as_ref().map(|l| l.url.as_str()),
                })
                .map_err(|e| e.to_string())?;
                let headers =
                    crate::signature::signed_headers(&w.secret, "POST", w.url.path(), &body)
                        .map_err(|e| format!("no randomness for the nonce: {e}"))?;
                let mut request = self
                    .client
                    .post(w.url.clone())
                    .header(IDEMPOTENCY_HEADER, &notice.idempotency_key);
                for (name, value) in headers {
                    request = request.header(name, value);
                }
                answered(request.body(body).send().await)
            }
            Some(Channel::Chat(c)) => {
                let link = self.link(notice, &c.link_as)?;
                let body = serde_json::json!({ "text": chat_text(notice, link.as_ref()) });
                answered(self.client.post(c.url.clone()).json(&body).send().await)
            }
            Some(Channel::Email(e)) => {
                let Some(to) = e.to.get(d.recipient) else {
                    return Err("no such recipient".into());
                };
                let Some(Some(transport)) = self.smtp.get(d.channel) else {
                    return Err("no SMTP transport".into());
                };
                let link = self.link(notice, to.email.as_ref())?;
                let message = lettre::Message::builder()
                    .from(e.from.clone())
                    .to(to.clone())
                    .subject(notice.subject())
                    .message_id(Some(format!(
                        "<agentrt.{}.{}.{}.{}@agentrt.invalid>",
                        notice.seq,
                        match notice.kind {
                            super::NoticeKind::Reminder => "reminder",
                            _ => "notice",
                        },
                        d.channel,
                        d.recipient
                    )))
                    .header(lettre::message::header::ContentType::TEXT_PLAIN)
                    .body(notice.text(link.as_ref()))
                    .map_err(|e| format!("cannot build the message: {e}"))?;
                transport
                    .send(message)
                    .await
                    .map(|_| ())
                    .map_err(|e| format!("SMTP: {e}"))
            }
            None => Err("no such channel".into()),
        }
    }
}

/// A 2xx answer is a delivery; anything else is told with its status.
fn answered(sent: Result<reqwest::Response, reqwest::Error>) -> Result<(), String> {
    match sent {
        Ok(response) if response.status().is_success() => Ok(()),
        Ok(response) => Err(format!("answered {}", response.status())),
        // Without the URL: a chat hook's is a credential.
        Err(e) => Err(e.without_url().to_string()),
    }
}

/// The chat message: everything from the log inside one code block (its
/// backticks replaced), so a model's text cannot become a link or a
/// mention, and `<`, `>`, `&` escaped as Slack asks; the page link outside
/// it, the only link in the message.
pub(crate) fn chat_text(notice: &Notice, link: Option<&Link>) -> String {
    let escape = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('`', "'")
    };
    let mut out = format!("{}\n```\n", escape(&notice.subject()));
    out.push_str(&escape(&notice.text(None)));
    out.push_str("```");
    if let Some(link) = link {
        out.push_str(&format!(
            "\nApprove or reject on the page (the link signs in once, within {} minutes): {}",
            link.minutes, link.url
        ));
    }
    out
}

fn smtp_transport(
    e: &super::config::EmailChannel,
) -> Result<AsyncSmtpTransport<Tokio1Executor>, String> {
    let tls = |host: &str| {
        let failed = |err: lettre::transport::smtp::Error| format!("TLS for {host}: {err}");
        match &e.ca_pem {
            None => TlsParameters::new(host.to_owned()).map_err(failed),
            // Only the given CA: a private relay's certificate.
            Some(pem) => TlsParameters::builder(host.to_owned())
                .certificate_store(CertificateStore::None)
                .add_root_certificate(Certificate::from_pem(pem).map_err(failed)?)
                .build_rustls()
                .map_err(failed),
        }
    };
    let tls = match e.security {
        Security::Tls => Tls::Wrapper(tls(&e.host)?),
        Security::Starttls => Tls::Required(tls(&e.host)?),
        Security::None => Tls::None,
    };
    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&e.host)
        .port(e.port)
        .tls(tls)
        .timeout(Some(ATTEMPT_TIMEOUT));
    if let Some((user, password)) = &e.login {
        builder = builder.credentials(Credentials::new(user.clone(), password.clone()));
    }
    Ok(builder.build())
}
