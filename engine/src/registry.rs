//! The registry of stage kinds a pipeline may use. Stages are stored type-erased so one engine
//! runs them all; options are deserialized into each stage's own type at compile time.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use crate::pipeline::{CompiledPipeline, PipelineError, PipelineSource};
use crate::stage::{Stage, StageContext, StageError};

pub(crate) trait ErasedStage: Send + Sync {
    fn parse_options(&self, value: yaml_serde::Value)
    -> Result<Arc<dyn Any + Send + Sync>, String>;
    fn run<'a>(
        &'a self,
        options: &'a (dyn Any + Send + Sync),
        ctx: &'a StageContext,
    ) -> BoxFuture<'a, Result<Value, StageError>>;
    fn unavailable(&self) -> Option<String>;
}

impl<S: Stage> ErasedStage for S {
    fn parse_options(
        &self,
        value: yaml_serde::Value,
    ) -> Result<Arc<dyn Any + Send + Sync>, String> {
        let options: S::Options = yaml_serde::from_value(value).map_err(|e| e.to_string())?;
        Ok(Arc::new(options))
    }

    fn run<'a>(
        &'a self,
        options: &'a (dyn Any + Send + Sync),
        ctx: &'a StageContext,
    ) -> BoxFuture<'a, Result<Value, StageError>> {
        match options.downcast_ref::<S::Options>() {
            Some(options) => Stage::run(self, options, ctx),
            None => Box::pin(async {
                Err(StageError::fatal(
                    "engine_bug",
                    "stage options do not match the stage kind",
                ))
            }),
        }
    }

    fn unavailable(&self) -> Option<String> {
        Stage::unavailable(self)
    }
}

#[derive(Default, Clone)]
pub struct Registry {
    stages: BTreeMap<&'static str, Arc<dyn ErasedStage>>,
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a stage kind. A later registration of the same kind replaces the earlier one.
    pub fn register<S: Stage>(&mut self, stage: S) -> &mut Self {
        self.stages.insert(S::KIND, Arc::new(stage));
        self
    }

    pub fn kinds(&self) -> Vec<&'static str> {
        self.stages.keys().copied().collect()
    }

    pub(crate) fn get(&self, kind: &str) -> Option<&Arc<dyn ErasedStage>> {
        self.stages.get(kind)
    }

    /// Why stages of `kind` cannot run in this process, if they cannot ([`Stage::unavailable`]).
    pub fn unavailable(&self, kind: &str) -> Option<String> {
        self.get(kind).and_then(|stage| stage.unavailable())
    }

    /// Parses and checks a pipeline against the stage kinds registered here.
    pub fn compile(&self, source: &PipelineSource) -> Result<CompiledPipeline, PipelineError> {
        crate::pipeline::compile::compile(source, self)
    }
}
