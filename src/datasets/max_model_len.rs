//! `--max-model-len`: drop requests that cannot fit the model's context.

use super::SampleRequest;

/// Keeps the requests with `prompt_len + expected_output_len <= max_model_len`, in order;
/// returns them and how many were dropped.
/// Whether a request fits `--max-model-len`.
pub fn fits(r: &SampleRequest, max_model_len: usize) -> bool {
    r.prompt_len + r.expected_output_len <= max_model_len
}

pub fn retain_within(
    requests: Vec<SampleRequest>,
    max_model_len: usize,
) -> (Vec<SampleRequest>, usize) {
    let before = requests.len();
    let kept: Vec<SampleRequest> = requests
        .into_iter()
        .filter(|r| fits(r, max_model_len))
        .collect();
    let dropped = before - kept.len();
    (kept, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::Prompt;
    use std::sync::Arc;

    #[test]
    fn keeps_exact_fit_and_drops_overflow_in_order() {
        let req = |p: usize, o: usize| SampleRequest {
            prompt: Prompt::Text(Arc::from("x")),
            prompt_len: p,
            expected_output_len: o,
            request_id: Some(format!("{p}")),
        };
        let (kept, dropped) =
            retain_within(vec![req(10, 6), req(10, 5), req(3, 1), req(16, 0)], 15);
        assert_eq!(dropped, 2);
        let ids: Vec<_> = kept.iter().map(|r| r.request_id.clone().unwrap()).collect();
        assert_eq!(ids, vec!["10", "3"]);
    }
}
