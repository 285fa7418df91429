//! The GPT module: embeddings, transformer blocks, final LayerNorm, tied output head, loss.

use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Dropout, Embedding, LayerNorm};
use burn::prelude::*;

use crate::block::TransformerBlock;
use crate::error::GptError;

/// A GPT-2-style decoder. Build it with [`GptConfig::init`](crate::GptConfig::init).
#[derive(Module, Debug)]
pub struct Gpt<B: Backend> {
    /// Token embedding `[vocab_size, d_model]`, also the output head (weight tying).
    pub token_embedding: Embedding<B>,
    /// Learned position embedding `[context_length, d_model]`.
    pub position_embedding: Embedding<B>,
    /// Dropout on the summed embeddings.
    pub dropout: Dropout,
    /// Transformer blocks.
    pub blocks: Vec<TransformerBlock<B>>,
    /// LayerNorm before the output head.
    pub final_norm: LayerNorm<B>,
    /// Size of the vocabulary.
    pub vocab_size: usize,
    /// Longest accepted sequence.
    pub context_length: usize,
}

impl<B: Backend> Gpt<B> {
    /// Logits `[batch, seq, vocab_size]` for token ids `[batch, seq]`.
    ///
    /// Neither `seq <= context_length` nor the id range is checked; use [`Gpt::try_forward`]
    /// for inputs you do not control.
    pub fn forward(&self, tokens: Tensor<B, 2, Int>) -> Tensor<B, 3> {
        let [batch, seq] = tokens.dims();
        let positions = self
            .position_embedding
            .weight
            .val()
            .narrow(0, 0, seq)
            .unsqueeze::<3>();
        let mut x = self
            .dropout
            .forward(self.token_embedding.forward(tokens) + positions);
        for block in &self.blocks {
            x = block.forward(x);
        }
        let x = self.final_norm.forward(x);
        let d_model = x.dims()[2];
        let head = self.token_embedding.weight.val().transpose();
        x.reshape([batch * seq, d_model])
            .matmul(head)
            .reshape([batch, seq, self.vocab_size])
    }

    /// [`Gpt::forward`] after checking that `1 <= seq <= context_length`.
    pub fn try_forward(&self, tokens: Tensor<B, 2, Int>) -> Result<Tensor<B, 3>, GptError> {
        self.check_len(tokens.dims()[1], 1, self.context_length)?;
        Ok(self.forward(tokens))
    }

    /// Mean next-token cross-entropy of `tokens [batch, seq]`: position `i` predicts token
    /// `i + 1`, so `seq - 1` positions per row are scored and `seq` may be `context_length + 1`.
    pub fn next_token_loss(&self, tokens: Tensor<B, 2, Int>) -> Result<Tensor<B, 1>, GptError> {
        let [batch, seq] = tokens.dims();
        self.check_len(seq, 2, self.context_length + 1)?;
        let inputs = tokens.clone().narrow(1, 0, seq - 1);
        let targets = tokens.narrow(1, 1, seq - 1).reshape([batch * (seq - 1)]);
        let logits = self
            .forward(inputs)
            .reshape([batch * (seq - 1), self.vocab_size]);
        let loss = CrossEntropyLossConfig::new().init(&logits.device());
        Ok(loss.forward(logits, targets))
    }

    fn check_len(&self, len: usize, min: usize, max: usize) -> Result<(), GptError> {
        if (min..=max).contains(&len) {
            Ok(())
        } else {
            Err(GptError::SequenceLength { len, min, max })
        }
    }
}
