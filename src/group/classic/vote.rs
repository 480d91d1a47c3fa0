//! The protocol vote of a classic group: which protocol the members have in common, and
//! which one they choose at a barrier (Kafka's vote, with the broker's eager assignors first
//! when it would assign).

use std::collections::BTreeMap;

use super::{is_cooperative, ClassicGroup, Protocol, BROKER_ASSIGNORS};

impl ClassicGroup {
    /// Whether `offered` shares a protocol with every other member (a member's own earlier
    /// protocols do not count).
    pub(super) fn offers_common_protocol(&self, member_id: &str, offered: &[Protocol]) -> bool {
        let mut others = self
            .members
            .values()
            .filter(|m| m.id != member_id)
            .peekable();
        if others.peek().is_none() {
            return true;
        }
        offered.iter().any(|p| {
            others
                .clone()
                .all(|m| m.protocols.iter().any(|q| q.name == p.name))
        })
    }

    /// The protocols every member offers, in the first member's order of preference.
    fn candidates(&self) -> Vec<String> {
        let mut members = self.members.values();
        let Some(first) = members.next() else {
            return Vec::new();
        };
        let mut candidates: Vec<String> = first.protocols.iter().map(|p| p.name.clone()).collect();
        for m in members {
            candidates.retain(|c| m.protocols.iter().any(|p| &p.name == c));
        }
        candidates
    }

    /// Whether the broker can assign these members: consumers whose subscriptions it read.
    pub(super) fn broker_can_assign(&self) -> bool {
        self.protocol_type == "consumer" && self.members.values().all(|m| m.subscription_read)
    }

    /// Kafka's vote (each member for its most preferred candidate; most votes wins, ties to
    /// the earlier candidate), without the cooperative candidates when the broker would
    /// assign an eager one: the broker's assignments are eager (a member revokes everything
    /// before it joins again), which a cooperative protocol's client would not expect.
    pub(super) fn choose_protocol(&self) -> Option<String> {
        let mut candidates = self.candidates();
        let eager_served = |c: &String| BROKER_ASSIGNORS.contains(&&**c) && !is_cooperative(c);
        if self.broker_can_assign() && candidates.iter().any(eager_served) {
            candidates.retain(|c| !is_cooperative(c));
        }
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(p) = m.protocols.iter().find(|p| candidates.contains(&p.name)) {
                *votes.entry(p.name.as_str()).or_default() += 1;
            }
        }
        let most = votes.values().copied().max()?;
        candidates
            .into_iter()
            .find(|c| votes.get(c.as_str()) == Some(&most))
    }
}
