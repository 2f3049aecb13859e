//! sky-pvas-hostile: a hostile end of a queue between machines, for tests
//! only (built with the `fault-injection` feature). It connects as a
//! well-formed peer, then either writes garbage wherever the protocol lets
//! it write (`--act scribble`: the peer's ring for a push sender, the
//! peer's counter word for both) or tries what the peer's ring does not
//! grant (`--act reach`: a READ of a push receiver's ring, a WRITE into a
//! pull sender's). Prints `ok ...` and exits 0 when it did its harm (for
//! `reach`: when the peer's NIC refused it), `error: ...` and 1 otherwise.

#[path = "remote/end.rs"]
mod end;

use clap::{Parser, ValueEnum};
use sky_pvas::Error;

#[derive(Parser)]
#[command(name = "sky-pvas-hostile")]
struct Cli {
    #[command(flatten)]
    end: end::End,
    #[arg(long, value_enum)]
    act: Act,
    /// Where the garbage comes from (xorshift).
    #[arg(long, default_value_t = 0x5eed)]
    seed: u64,
    /// Rounds of garbage.
    #[arg(long, default_value_t = 32)]
    rounds: u32,
}

#[derive(Clone, Copy, ValueEnum)]
enum Act {
    Scribble,
    Reach,
}

fn main() {
    let cli = Cli::parse();
    let run = || -> Result<String, Error> {
        let queue = cli.end.connect(false)?;
        let q = queue
            .remote()
            .expect("connect opens a queue between machines");
        Ok(match cli.act {
            Act::Scribble => {
                let (writes, hung_up) = q.scribble(cli.seed, cli.rounds)?;
                match hung_up {
                    None => format!("scribbled writes={writes}"),
                    Some(why) => format!("scribbled writes={writes} until the peer hung up: {why}"),
                }
            }
            Act::Reach => format!("refused: {}", q.reach_beyond_grant()?),
        })
    };
    match run() {
        Ok(what) => println!("ok {what}"),
        Err(e) => {
            println!("error: {e}");
            std::process::exit(1);
        }
    }
}
