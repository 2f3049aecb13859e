//! `/proc/PID/mountinfo`: where each mount is and what filesystem it is.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// One line of mountinfo: where a mount is and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub point: PathBuf,
    pub fstype: String,
}

/// `mountinfo` parsed: field 5 is the mount point (octal escapes for
/// space, tab, newline, backslash), and the filesystem type follows the
/// `-` that ends the optional fields. Malformed lines are skipped.
pub fn parse(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let point = unescape(fields.get(4)?);
            let dash = fields.iter().skip(6).position(|f| *f == "-")? + 6;
            let fstype = fields.get(dash + 1)?.to_string();
            Some(Mount {
                point: PathBuf::from(point),
                fstype,
            })
        })
        .collect()
}

fn unescape(field: &str) -> OsString {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    OsString::from_vec(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn escapes_and_optional_fields_are_read_and_bad_lines_skipped() {
        let m = parse(
            "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
             24 22 0:22 / /home/alice/my\\040fuse rw,nosuid - fuse.sshfs alice@h: rw\n\
             25 22 0:23 / /mnt/nfs rw master:3 shared:9 - nfs4 srv:/x rw\n\
             bad line\n",
        );
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].point, Path::new("/"));
        assert_eq!(m[1].point, Path::new("/home/alice/my fuse"));
        assert_eq!(m[1].fstype, "fuse.sshfs");
        assert_eq!(m[2].fstype, "nfs4");
    }
}
