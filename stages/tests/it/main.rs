//! The stages crate's component tests, compiled into one binary: the concrete stages and the
//! providers through the real engine on real SQLite files, and the generic-compatible provider
//! against a fake OpenAI-compatible server on 127.0.0.1.

mod clean_failures;
mod extraction;
mod fake_server;
mod fencing;
mod model_limits;
mod ocr;
mod openai_provider;
mod pipeline;
mod provider_pipelines;
mod stages;
