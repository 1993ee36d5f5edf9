//! Landlock's audit records, read: `LANDLOCK_ACCESS` (what a domain
//! refused) and `LANDLOCK_DOMAIN`'s `allocated` (which process made the
//! domain; its `deallocated` record is not needed). The text is the
//! kernel's `key=value` fields; a value the kernel could not print safely
//! (a path with a space or a quote) is hex, unquoted.

use crate::model::Denial;

/// `AUDIT_LANDLOCK_ACCESS`: one refused access.
pub const LANDLOCK_ACCESS: u16 = 1423;
/// `AUDIT_LANDLOCK_DOMAIN`: a domain's making (at its first logged
/// denial), and its end.
pub const LANDLOCK_DOMAIN: u16 = 1424;

/// One record of interest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// `domain=ID blockers=… path=…`: the domain refused this.
    Access { domain: u64, denial: Denial },
    /// `domain=ID status=allocated … pid=PID`: the domain PID made.
    Allocated { domain: u64, pid: i32 },
}

impl Record {
    /// The record a message of `kind` with `text` is, if one of interest.
    pub fn parse(kind: u16, text: &str) -> Option<Record> {
        let body = text.split_once("): ").map_or(text, |(_, body)| body);
        let field = |name: &str| value(body, name);
        let domain = u64::from_str_radix(&field("domain")?, 16).ok()?;
        match kind {
            LANDLOCK_ACCESS => Some(Record::Access {
                domain,
                denial: Denial {
                    blockers: field("blockers")?.split(',').map(str::to_owned).collect(),
                    path: field("path"),
                    address: address(&field),
                    by: "landlock".into(),
                },
            }),
            LANDLOCK_DOMAIN => match field("status")?.as_str() {
                "allocated" => Some(Record::Allocated {
                    domain,
                    pid: field("pid")?.parse().ok()?,
                }),
                _ => None,
            },
            _ => None,
        }
    }
}

/// A network denial's address: `daddr`/`dest` for a connect (the port
/// alone for a bind), as `host:port`.
fn address(field: &impl Fn(&str) -> Option<String>) -> Option<String> {
    let port = field("dest").or_else(|| field("src"))?;
    Some(match field("daddr").or_else(|| field("saddr")) {
        Some(host) if host.contains(':') => format!("[{host}]:{port}"),
        Some(host) => format!("{host}:{port}"),
        None => format!("port {port}"),
    })
}

/// The value of field `name` in `body`: quoted text unquoted, hex
/// decoded, anything else as it stands.
fn value(body: &str, name: &str) -> Option<String> {
    let mut rest = body;
    loop {
        let at = rest.find(&format!("{name}="))?;
        let starts_field = at == 0 || rest.as_bytes()[at - 1] == b' ';
        let after = &rest[at + name.len() + 1..];
        if !starts_field {
            rest = after;
            continue;
        }
        if let Some(quoted) = after.strip_prefix('"') {
            return Some(quoted.split('"').next()?.to_owned());
        }
        let raw = after.split(' ').next().unwrap_or("");
        return Some(unhex(raw).unwrap_or_else(|| raw.to_owned()));
    }
}

/// A hex-printed untrusted string (`audit_log_n_untrustedstring`), when
/// `raw` is one: even length, hex digits only, printable once decoded.
fn unhex(raw: &str) -> Option<String> {
    if raw.len() < 2 || !raw.len().is_multiple_of(2) || !raw.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return None;
    }
    let bytes: Vec<u8> = (0..raw.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&raw[i..i + 2], 16).ok())
        .collect::<Option<_>>()?;
    // Only a path (it has a slash) is taken as hex: `19`, an inode,
    // stays a number.
    bytes
        .contains(&b'/')
        .then(|| String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_denial_names_its_rights_and_its_path() {
        let record = Record::parse(
            LANDLOCK_ACCESS,
            "audit(1796402357.406:2): domain=167e649d3 blockers=fs.make_reg path=\"/etc\" dev=\"vda\" ino=19",
        );
        assert_eq!(
            record,
            Some(Record::Access {
                domain: 0x167e649d3,
                denial: Denial {
                    blockers: vec!["fs.make_reg".into()],
                    path: Some("/etc".into()),
                    address: None,
                    by: "landlock".into(),
                },
            })
        );
    }

    #[test]
    fn a_path_the_kernel_printed_as_hex_is_decoded() {
        // "/w/a b"
        let record = Record::parse(
            LANDLOCK_ACCESS,
            "audit(1.2:3): domain=1 blockers=fs.write_file,fs.truncate path=2F772F612062 dev=\"vda\" ino=7",
        );
        let Some(Record::Access { denial, .. }) = record else {
            panic!("{record:?}");
        };
        assert_eq!(denial.path.as_deref(), Some("/w/a b"));
        assert_eq!(denial.blockers, ["fs.write_file", "fs.truncate"]);
    }

    #[test]
    fn a_connect_denial_names_its_address() {
        let record = Record::parse(
            LANDLOCK_ACCESS,
            "audit(1.2:3): domain=1 blockers=net.connect_tcp daddr=127.0.0.1 dest=80",
        );
        let Some(Record::Access { denial, .. }) = record else {
            panic!("{record:?}");
        };
        assert_eq!(denial.address.as_deref(), Some("127.0.0.1:80"));
        assert_eq!(denial.path, None);
    }

    #[test]
    fn a_domain_is_made_by_a_pid_and_its_end_is_not_read() {
        assert_eq!(
            Record::parse(
                LANDLOCK_DOMAIN,
                "audit(1.4:2): domain=167e649d3 status=allocated mode=enforcing pid=2116 uid=0 exe=\"/usr/bin/x\" comm=\"x\""
            ),
            Some(Record::Allocated {
                domain: 0x167e649d3,
                pid: 2116
            })
        );
        assert_eq!(
            Record::parse(
                LANDLOCK_DOMAIN,
                "audit(1.4:3): domain=167e649d3 status=deallocated denials=3"
            ),
            None
        );
        assert_eq!(Record::parse(1300, "audit(1.4:3): arch=c000003e"), None);
    }
}
