//! The direct produce routes an [`super::AsyncNanoKafka`] caches, per topic (see its docs).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::actors::coordinator::CoordinatorRef;
use crate::actors::lane::Lane;
use crate::actors::partition::PartitionRef;
use crate::actors::topic::TopicRoute;
use crate::config::{CleanupPolicy, SchemaValidation};
use crate::routing::RequestLimits;

/// Topic → how its produces travel; shared by a handle's clones.
#[derive(Debug, Default, Clone)]
pub(super) struct RouteCache(Arc<Mutex<HashMap<String, RouteSlot>>>);

/// How one topic's produces travel from this handle.
#[derive(Debug, Default)]
struct RouteSlot {
    /// Known and in use: produces go straight to the partitions.
    direct: Option<Arc<Route>>,
    /// Known, waiting for the produces through the broker to finish.
    learned: Option<Arc<Route>>,
    /// Produces through the broker not yet answered.
    via_broker: usize,
    /// A produce is asking for the route.
    asking: bool,
}

/// How a produce travels, decided before anything is awaited.
pub(super) enum ProducePath {
    Direct(Arc<Route>),
    ViaBroker { ask_route: bool },
}

/// Where a topic's records go.
#[derive(Debug)]
pub(super) struct Route {
    /// Each partition's produce lane (the topic's own: see `actors::lane`).
    pub lanes: Vec<Arc<Lane>>,
    /// Each partition's actor, for the direct commit route.
    pub partitions: Vec<PartitionRef>,
    /// The coordinators of the groups this handle has seen exist on the topic (a commit or a
    /// poll through the broker succeeded): their polls go straight to the coordinator and
    /// their commits straight to the partition. A group is never removed from a live topic,
    /// so the `UnknownGroup` rule holds without asking the topic.
    groups: Mutex<HashMap<String, CoordinatorRef>>,
    /// Round-robin counter for keyless records sent through this handle (and its clones).
    pub next_keyless: AtomicU32,
    /// The broker's size limits.
    pub limits: RequestLimits,
    /// The topic's policy as the route was taken, for the key rule of a compacted topic
    /// (an alter that changes it marks the route stale).
    pub cleanup_policy: CleanupPolicy,
    /// The topic's schema validation as the route was taken (an alter that changes it marks
    /// the route stale).
    pub schema_validation: SchemaValidation,
    /// The topic was deleted (the route leads to closed partitions), has grown (the route
    /// misses its new partitions) or changed its cleanup policy.
    stale: Arc<AtomicBool>,
}

impl Route {
    fn new(route: TopicRoute) -> Self {
        Route {
            lanes: route.lanes,
            partitions: route.partitions,
            groups: Mutex::default(),
            next_keyless: AtomicU32::new(route.next_keyless),
            limits: route.limits,
            cleanup_policy: route.cleanup_policy,
            schema_validation: route.schema_validation,
            stale: route.stale,
        }
    }

    pub fn is_live(&self) -> bool {
        !self.stale.load(Ordering::Acquire)
    }

    /// `group` exists on this route's topic, with `coordinator`, as the topic answered after
    /// this route was taken: its next polls and commits take the direct route, unless the
    /// topic was deleted (or grew) meanwhile, when the answer may be another topic's.
    pub fn learn_group(&self, group: &str, coordinator: CoordinatorRef) {
        if self.is_live() {
            self.groups
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .insert(group.to_owned(), coordinator);
        }
    }

    fn coordinator(&self, group: &str) -> Option<CoordinatorRef> {
        self.groups
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(group)
            .cloned()
    }
}

impl RouteCache {
    fn slots(&self) -> MutexGuard<'_, HashMap<String, RouteSlot>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Uses `route` for `topic` at once, unless a live route is known or a produce is on its
    /// way through the broker.
    pub fn learn(&self, topic: &str, route: TopicRoute) {
        let mut slots = self.slots();
        let slot = slots.entry(topic.to_owned()).or_default();
        // A stale route counts as none: `route` is its re-created or grown successor's.
        let stale = slot.direct.as_ref().is_none_or(|r| !r.is_live());
        if stale && slot.via_broker == 0 {
            slot.direct = Some(Arc::new(Route::new(route)));
        }
    }

    /// `topic`'s schema validation, from its live route, if one is known.
    pub fn schema_validation(&self, topic: &str) -> Option<SchemaValidation> {
        let slots = self.slots();
        let slot = slots.get(topic)?;
        let live = |r: &&Arc<Route>| r.is_live();
        let route = slot
            .direct
            .as_ref()
            .filter(live)
            .or(slot.learned.as_ref().filter(live))?;
        Some(route.schema_validation)
    }

    /// Forgets `topic`'s route (deleted or grown): its next produce goes through the broker.
    pub fn forget(&self, topic: &str) {
        let mut slots = self.slots();
        if let Some(slot) = slots.get_mut(topic) {
            slot.direct = None;
            slot.learned = None;
        }
    }

    /// Decides how a produce to `topic` travels; a produce through the broker must be
    /// reported with [`RouteCache::finish_via_broker`]. `sequential`: the caller never has
    /// two produces in flight, so a learned route may be used at once.
    pub fn path(&self, topic: &str, sequential: bool) -> ProducePath {
        let mut slots = self.slots();
        // The common case, a known route, looks up without allocating the key.
        if let Some(slot) = slots.get_mut(topic) {
            // A stale route is dropped: the broker knows whether the name exists again, and
            // how many partitions it has.
            slot.direct = slot.direct.take().filter(|r| r.is_live());
            slot.learned = slot.learned.take().filter(|r| r.is_live());
            let usable = match sequential {
                true => slot.direct.as_ref().or(slot.learned.as_ref()),
                false => slot.direct.as_ref(),
            };
            if let Some(route) = usable {
                return ProducePath::Direct(route.clone());
            }
        }
        let slot = slots.entry(topic.to_owned()).or_default();
        slot.via_broker += 1;
        let ask_route = slot.learned.is_none() && !slot.asking;
        slot.asking |= ask_route;
        ProducePath::ViaBroker { ask_route }
    }

    /// A produce through the broker is answered: switch to the direct route once the route
    /// is known and no produce through the broker is left in flight.
    pub fn finish_via_broker(&self, topic: &str, asked: bool, learned: Option<TopicRoute>) {
        let mut slots = self.slots();
        let slot = slots.entry(topic.to_owned()).or_default();
        slot.via_broker -= 1;
        if asked {
            slot.asking = false;
            slot.learned = learned.map(|route| Arc::new(Route::new(route)));
        }
        if slot.via_broker == 0 && slot.learned.is_some() {
            slot.direct = slot.learned.take();
        }
    }

    /// `topic`'s live direct route, if this handle knows it.
    fn live_route(&self, topic: &str) -> Option<Arc<Route>> {
        let slots = self.slots();
        let route = slots.get(topic)?.direct.as_ref()?;
        route.is_live().then(|| route.clone())
    }

    /// The partition a commit for `group` may go to directly: `topic`'s route is known and
    /// live, has `partition`, and `group` is known to exist there. `None`: ask the broker
    /// (which also answers `UnknownGroup`, `UnknownPartition` and `UnknownTopic`).
    pub fn commit_target(
        &self,
        topic: &str,
        group: &str,
        partition: u32,
    ) -> Option<(Arc<Route>, PartitionRef)> {
        let route = self.live_route(topic)?;
        let target = route.partitions.get(partition as usize)?.clone();
        route.coordinator(group).map(|_| (route, target))
    }

    /// The coordinator a poll of `group` may go to directly: `topic`'s route is known and
    /// live, and `group`'s coordinator known. `None`: ask the broker.
    pub fn poll_target(&self, topic: &str, group: &str) -> Option<(Arc<Route>, CoordinatorRef)> {
        let route = self.live_route(topic)?;
        let coordinator = route.coordinator(group)?;
        Some((route, coordinator))
    }

    /// `topic`'s live route when it does not know `group`'s coordinator yet: ask the broker
    /// for it ([`Route::learn_group`]).
    pub fn lacking_group(&self, topic: &str, group: &str) -> Option<Arc<Route>> {
        self.live_route(topic)
            .filter(|route| route.coordinator(group).is_none())
    }
}
