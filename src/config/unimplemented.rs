//! Refusing what the parser accepts but vllm-bench cannot run yet (the list is
//! [`crate::cli::unimplemented`]): one clear line naming the first such backend, dataset or
//! flag of a command line.

use super::ConfigError;
use crate::cli::unimplemented::{is_choice, is_flag};
use crate::cli::Cli;

/// Refuses the first unimplemented backend, dataset or flag of `cli`.
pub fn check(cli: &Cli) -> Result<(), ConfigError> {
    let backend = cli.server.backend.name();
    if is_choice("--backend", backend) {
        return Err(ConfigError::not_implemented(&format!(
            "--backend {backend}"
        )));
    }
    let dataset = cli.dataset.dataset_name.name();
    if is_choice("--dataset-name", dataset) {
        return Err(ConfigError::not_implemented(&format!(
            "--dataset-name {dataset}"
        )));
    }
    match cli.given().iter().find(|f| is_flag(f)) {
        Some(flag) => Err(ConfigError::not_implemented(flag)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::CliError;

    fn parse(args: &[&str]) -> Result<Cli, CliError> {
        crate::cli::parse_from(std::iter::once("vllm-bench").chain(args.iter().copied()))
    }

    #[test]
    fn check_refuses_the_first_given_flag() {
        let cli = parse(&["--lora-modules", "x", "--compare", "a", "b"]).unwrap();
        assert_eq!(
            check(&cli).unwrap_err().message(),
            ConfigError::not_implemented("--lora-modules").message()
        );
        let cli = parse(&["--backend", "openai-audio"]).unwrap();
        assert!(check(&cli)
            .unwrap_err()
            .message()
            .starts_with("--backend openai-audio: not implemented yet"));
        let cli = parse(&["--dataset-name", "custom_audio"]).unwrap();
        assert!(check(&cli)
            .unwrap_err()
            .message()
            .starts_with("--dataset-name custom_audio: not implemented yet"));
        let trace = parse(&["--dataset-name", "timed-trace", "--no-self-timed"]).unwrap();
        assert!(check(&trace).is_ok());
        assert!(check(&parse(&["--seed", "1"]).unwrap()).is_ok());
    }
}
