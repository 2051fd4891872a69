//! Shared values written as JSON again as they were written last: a checkpoint writes
//! each job's spec as the last checkpoint did (`model::Job::spec`,
//! `Cluster::write_checkpoint`). A job's spec is shared (`Arc`) and not changed once
//! submitted (a change makes a new one), and the specs were about half the work of a
//! checkpoint of a large cluster, written every few seconds while it changes. A leaf:
//! it knows none of the core's types.

use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;
use serde_json::value::RawValue;

/// A value's JSON, and the value it was written from, held: while it is, no other
/// value has its address, and it is not changed in place (`Arc::make_mut` copies it).
type Kept = (Arc<dyn Any + Send + Sync>, Box<RawValue>);

/// The values a writing wrote through [`as_written`], by address, for the next. A copy
/// (a what-if's cluster) starts without them.
#[derive(Default)]
pub struct Texts(Mutex<HashMap<usize, Kept>>);

impl Texts {
    fn lock(&self) -> MutexGuard<'_, HashMap<usize, Kept>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `write` (a JSON writing of about `n` kept values, on this thread) with the
    /// texts kept: what it writes through [`as_written`] is written as kept, and kept
    /// for the next writing; what it did not write is let go.
    pub fn writing<R>(&self, n: usize, write: impl FnOnce() -> R) -> R {
        let before = std::mem::take(&mut *self.lock());
        WRITING.with(|w| {
            *w.borrow_mut() = Some(Writing {
                before,
                now: HashMap::with_capacity(n),
            })
        });
        let out = write();
        if let Some(w) = WRITING.with(|w| w.borrow_mut().take()) {
            *self.lock() = w.now;
        }
        out
    }
}

impl Clone for Texts {
    fn clone(&self) -> Texts {
        Texts::default()
    }
}

impl std::fmt::Debug for Texts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Texts({})", self.lock().len())
    }
}

/// The texts while a writing runs on this thread: those of the last writing, and those
/// of this one.
struct Writing {
    before: HashMap<usize, Kept>,
    now: HashMap<usize, Kept>,
}

thread_local! {
    static WRITING: RefCell<Option<Writing>> = const { RefCell::new(None) };
}

/// A shared value as a writing ([`Texts::writing`]) writes it: the text the last
/// writing wrote of this very value, else the value serialised (and kept for the
/// next). Outside a writing, the value serialised.
pub fn as_written<T, S>(v: &Arc<T>, s: S) -> Result<S::Ok, S::Error>
where
    T: Serialize + Send + Sync + 'static,
    S: serde::Serializer,
{
    WRITING.with(|w| {
        let mut w = w.borrow_mut();
        let Some(w) = w.as_mut() else {
            return v.serialize(s);
        };
        let key = Arc::as_ptr(v) as *const () as usize;
        if let Some((_, text)) = w.now.get(&key) {
            return text.serialize(s);
        }
        let (held, text) = match w.before.remove(&key) {
            Some(kept) => kept,
            None => {
                // Serialised as it would be in place (and not parsed again to check).
                let text =
                    serde_json::value::to_raw_value(&**v).map_err(serde::ser::Error::custom)?;
                (v.clone() as Arc<dyn Any + Send + Sync>, text)
            }
        };
        let out = text.serialize(s);
        w.now.insert(key, (held, text));
        out
    })
}
