//! The binding layer for `cordon:sandbox@0.3.0` (WIT in `wit/0.3.0/`):
//! world `0.2.0` and the `requests` export, a decision per HTTP request.
//!
//! The `0.3.0` world includes `0.2.0`'s whole (its executor, its types, the
//! host's confinement), so a component of it is driven by `0.2.0`'s layer
//! ([`super::v0_2_0`]) for every call but `request`, which this layer adds:
//! its bindings reuse `0.2.0`'s generated types, so a spec converts once.

use wasmtime::Store;
use wasmtime::component::{Component, ComponentExportIndex};

use crate::model::{self, HeaderEdit, HttpRequest, RequestVerdict};

use super::call::StoreState;
use super::shared::World;
use super::v0_2_0;

wasmtime::component::bindgen!({
    path: "wit/0.3.0",
    world: "requester",
    with: {
        "cordon:sandbox/types@0.2.0": super::v0_2_0::cordon::sandbox::types,
    },
});

use self::exports::cordon::sandbox0_3_0::requests as wit;

/// The world this layer binds.
pub(super) const WORLD: World = World {
    name: "cordon:sandbox/executor-policy@0.3.0",
    export: "cordon:sandbox/requests@0.3.0",
    also_exports: &[v0_2_0::WORLD.export],
    imports: v0_2_0::WORLD.imports,
};

/// A component of this version: `0.2.0`'s layer, and its `requests` export.
#[derive(Clone)]
pub(super) struct Binding {
    /// Every call `0.2.0` has.
    pub(super) executor: v0_2_0::Binding,
    /// Where `request` sits in the component, found once at link: a run's
    /// instance types only that export (as `0.2.0`'s run calls), not the
    /// world's seven.
    request: ComponentExportIndex,
}

impl Binding {
    /// Link `component`: its executor through `0.2.0`'s layer, its
    /// `requests` export found in an instance of the same component.
    pub(super) fn link(engine: &wasmtime::Engine, component: &Component) -> wasmtime::Result<Self> {
        let executor = v0_2_0::Binding::link(engine, component)?;
        // Every export of the world is there, by name; `request`'s type is
        // checked on the instance that calls it (as it was, at each run's
        // connecting instance, before), never at load.
        RequesterPre::new(executor.instance_pre().clone())?;
        let request = v0_2_0::export_index(component, WORLD.export, "request")?;
        Ok(Binding { executor, request })
    }

    /// An instance kept for the `connect` and `request` calls of one run:
    /// one instance of the component answers both.
    pub(super) fn connecting(
        &self,
        store: &mut Store<StoreState>,
        spec: &model::ExecSpec,
    ) -> wasmtime::Result<Result<Connecting, String>> {
        let instance = self.executor.instance_pre().instantiate(&mut *store)?;
        let executor = match self.executor.connecting_on(&instance, spec) {
            Ok(executor) => executor,
            Err(reason) => return Ok(Err(reason)),
        };
        Ok(Ok(Connecting {
            executor,
            instance,
            request: self.request,
        }))
    }
}

/// One instance deciding a run's connections and requests.
pub(super) struct Connecting {
    /// Its `connect`.
    pub(super) executor: v0_2_0::Connecting,
    instance: wasmtime::component::Instance,
    /// Where `request` sits (see [`Binding`]).
    request: ComponentExportIndex,
}

impl Connecting {
    /// `request` on this instance, for the spec it was made for.
    pub(super) fn request(
        &self,
        store: &mut Store<StoreState>,
        settings: &str,
        request: &HttpRequest,
    ) -> wasmtime::Result<RequestVerdict> {
        let request = wit::HttpRequest {
            method: request.method.clone(),
            scheme: request.scheme.clone(),
            host: request.host.clone(),
            port: request.port,
            path: request.path.clone(),
            query: request.query.clone(),
            headers: request.headers.clone(),
        };
        let call = self
            .instance
            .get_typed_func::<(&wit::ExecSpec, &str, &wit::HttpRequest), (wit::Verdict,)>(
                &mut *store,
                &self.request,
            )?;
        let (verdict,) = call.call(&mut *store, (self.executor.spec(), settings, &request))?;
        Ok(match verdict {
            wit::Verdict::Allow => RequestVerdict::Allow,
            wit::Verdict::Deny(reason) => RequestVerdict::Deny(reason),
            wit::Verdict::Edit(edits) => {
                RequestVerdict::Edit(edits.into_iter().map(HeaderEdit::from).collect())
            }
            wit::Verdict::Ask(asked) => RequestVerdict::Ask {
                reason: asked.reason,
                edits: asked.edits.into_iter().map(HeaderEdit::from).collect(),
            },
        })
    }
}

impl From<wit::Edit> for HeaderEdit {
    fn from(edit: wit::Edit) -> Self {
        match edit {
            wit::Edit::SetHeader((name, value)) => HeaderEdit::Set(name, value),
            wit::Edit::RemoveHeader(name) => HeaderEdit::Remove(name),
            wit::Edit::AttachCredential(name) => HeaderEdit::AttachCredential(name),
        }
    }
}
