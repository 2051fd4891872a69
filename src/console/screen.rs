//! The console's screens, by name (`:SCREEN`, the tabs, the keys a verb declares for
//! a screen).

/// The screens, in Tab order, declared once: each screen's variant and its file under
/// `screens/` (whose name is the screen's: `:jobs`, the tab). `screen.rs` makes
/// [`Screen`] from the list and `screens/mod.rs` the dispatch to each file's `rows`,
/// `row_key`, `key`, `draw` and `KEYS`; neither names the other's modules. A new screen
/// is its file and its line here.
macro_rules! screen_list {
    ($then:ident) => {
        $then! {
            /// Everything at once: GPUs by model, the Pending queue, alerts, events.
            Overview overview,
            Nodes nodes,
            Jobs jobs,
            Quotas quotas,
            Events events,
            Alerts alerts,
            Cost cost,
            Logs logs,
            Help help,
        }
    };
}
pub(crate) use screen_list;

macro_rules! declare_screens {
    ($($(#[$doc:meta])* $variant:ident $file:ident,)*) => {
        /// The screens, in Tab order.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Screen {
            $($(#[$doc])* $variant,)*
        }

        const SCREENS: usize = [$(stringify!($file)),*].len();

        impl Screen {
            pub const ALL: [Screen; SCREENS] = [$(Screen::$variant),*];

            pub fn name(self) -> &'static str {
                match self {
                    $(Screen::$variant => stringify!($file),)*
                }
            }
        }
    };
}
screen_list!(declare_screens);

/// What a screen's key asks of the console beyond the screen's own state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Then {
    /// Handled.
    Done,
    /// The rows changed (a toggle): compute them again.
    Recompute,
    /// Go to what an object names (`job/NAME`, `node/NAME`, `gpu/NODE/N`).
    Follow(String),
}
