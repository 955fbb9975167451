//! The negotiation game itself: seats, item splits and their private values, the table of
//! proposals, the scripted partner's conceding strategy and the reference plan.

/// The item kinds on the table.
pub const ITEMS: [&str; 3] = ["book", "hat", "ball"];

/// Every seat's items are worth this much in total to it.
pub const TOTAL_VALUE: u32 = 10;

/// How many of each item a seat keeps.
pub type Split3 = [u32; 3];

/// One of the two negotiators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Seat {
    /// The first seat.
    Alice,
    /// The second seat.
    Bob,
}

impl Seat {
    /// Both seats, in order.
    pub const BOTH: [Seat; 2] = [Seat::Alice, Seat::Bob];

    /// `alice` or `bob`, as in `Message::name`.
    pub fn name(self) -> &'static str {
        match self {
            Seat::Alice => "alice",
            Seat::Bob => "bob",
        }
    }

    /// The seat called `name`.
    pub fn parse(name: &str) -> Option<Seat> {
        Seat::BOTH.into_iter().find(|s| s.name() == name)
    }

    /// 0 for alice, 1 for bob.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The other seat.
    pub fn other(self) -> Seat {
        match self {
            Seat::Alice => Seat::Bob,
            Seat::Bob => Seat::Alice,
        }
    }
}

/// One negotiation: the items, each seat's private values, who opens and the proposal limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deal {
    /// How many of each item there are.
    pub counts: Split3,
    /// Per-unit values, indexed by seat.
    pub values: [Split3; 2],
    /// The seat that moves first.
    pub first: Seat,
    /// Most proposals in all; if the last one is not accepted nobody gets anything.
    pub max_proposals: u32,
}

impl Deal {
    /// What `seat` is worth to `seat` when it keeps `keep`.
    pub fn value(&self, seat: Seat, keep: &Split3) -> u32 {
        (0..3).map(|i| keep[i] * self.values[seat.index()][i]).sum()
    }

    /// The rest of the items once `keep` is taken.
    pub fn rest(&self, keep: &Split3) -> Split3 {
        [0, 1, 2].map(|i| self.counts[i].saturating_sub(keep[i]))
    }

    /// Every way to keep a part of the items.
    pub fn splits(&self) -> Vec<Split3> {
        let c = self.counts;
        let mut out = Vec::new();
        for a in 0..=c[0] {
            for b in 0..=c[1] {
                for d in 0..=c[2] {
                    out.push([a, b, d]);
                }
            }
        }
        out
    }

    /// Whether `keep` is a possible share.
    pub fn fits(&self, keep: &Split3) -> bool {
        (0..3).all(|i| keep[i] <= self.counts[i])
    }

    /// The least value the scripted partner takes once `proposals` proposals were made: from
    /// 8 down to 5 as the limit nears.
    pub fn aspiration(&self, proposals: u32) -> u32 {
        let span = self.max_proposals.saturating_sub(1).max(1);
        8u32.saturating_sub(3 * proposals / span).max(5)
    }
}

/// The items of a share as text, e.g. `book 1, hat 0, ball 2`.
pub fn split_text(split: &Split3) -> String {
    let parts: Vec<String> = ITEMS
        .iter()
        .zip(split)
        .map(|(n, c)| format!("{n} {c}"))
        .collect();
    parts.join(", ")
}

/// A seat's move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    /// Offer a split: the mover keeps this, the other seat gets the rest.
    Propose(Split3),
    /// Take the other seat's standing offer.
    Accept,
}

/// Where a negotiation stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// The negotiation.
    pub deal: Deal,
    /// Whose move it is.
    pub turn: Seat,
    /// The standing offer: who made it and what they keep.
    pub offer: Option<(Seat, Split3)>,
    /// Proposals made so far.
    pub proposals: u32,
    /// Once over: what alice keeps if a deal was struck (`None`: no deal).
    pub result: Option<Option<Split3>>,
}

impl Table {
    /// A fresh table.
    pub fn new(deal: Deal) -> Self {
        let turn = deal.first;
        Table {
            deal,
            turn,
            offer: None,
            proposals: 0,
            result: None,
        }
    }

    /// What `seat` gets from the standing offer of the other seat, if there is one.
    pub fn offer_to(&self, seat: Seat) -> Option<Split3> {
        match self.offer {
            Some((from, keep)) if from != seat => Some(self.deal.rest(&keep)),
            _ => None,
        }
    }

    /// Applies `seat`'s move; the description of what happened, or why the move is refused.
    pub fn apply(&mut self, seat: Seat, m: Move) -> Result<String, String> {
        if self.result.is_some() {
            return Err("the negotiation is over".into());
        }
        if seat != self.turn {
            return Err(format!(
                "it is {}'s turn, not {}'s",
                self.turn.name(),
                seat.name()
            ));
        }
        let other = seat.other();
        match m {
            Move::Propose(_) if self.proposals >= self.deal.max_proposals => {
                self.result = Some(None);
                Ok(format!(
                    "{} proposed again after the last allowed proposal: no deal, nobody gets anything.",
                    seat.name()
                ))
            }
            Move::Propose(keep) if !self.deal.fits(&keep) => Err(format!(
                "there are only {} ({} asked to keep {})",
                split_text(&self.deal.counts),
                seat.name(),
                split_text(&keep)
            )),
            Move::Propose(keep) => {
                self.offer = Some((seat, keep));
                self.proposals += 1;
                self.turn = other;
                Ok(format!(
                    "{} proposes to keep {} and give {} {}.",
                    seat.name(),
                    split_text(&keep),
                    other.name(),
                    split_text(&self.deal.rest(&keep))
                ))
            }
            Move::Accept => {
                let mine = self
                    .offer_to(seat)
                    .ok_or_else(|| format!("there is no offer from {} to accept", other.name()))?;
                let alice = if seat == Seat::Alice {
                    mine
                } else {
                    self.deal.rest(&mine)
                };
                self.result = Some(Some(alice));
                Ok(format!(
                    "{} accepts: {} gets {}.",
                    seat.name(),
                    seat.name(),
                    split_text(&mine)
                ))
            }
        }
    }

    /// The value `seat` ends with (0 without a deal or while unfinished).
    pub fn value_of(&self, seat: Seat) -> u32 {
        let Some(Some(alice)) = &self.result else {
            return 0;
        };
        let keep = if seat == Seat::Alice {
            *alice
        } else {
            self.deal.rest(alice)
        };
        self.deal.value(seat, &keep)
    }

    /// What `seat` ends with, as a share of its total value.
    pub fn score(&self, seat: Seat) -> f64 {
        f64::from(self.value_of(seat)) / f64::from(TOTAL_VALUE)
    }

    /// The scripted partner's move for `seat`: accept an offer worth its current aspiration,
    /// otherwise propose the split worth at least its next aspiration that leaves the other
    /// seat the most items (then the least for itself).
    pub fn scripted_move(&self, seat: Seat) -> Move {
        let deal = &self.deal;
        if let Some(mine) = self.offer_to(seat)
            && deal.value(seat, &mine) >= deal.aspiration(self.proposals)
        {
            return Move::Accept;
        }
        let need = deal.aspiration(self.proposals + 1);
        let best = deal
            .splits()
            .into_iter()
            .filter(|k| deal.value(seat, k) >= need)
            .min_by_key(|k| (k.iter().sum::<u32>(), deal.value(seat, k), *k));
        Move::Propose(best.unwrap_or(deal.counts))
    }

    /// The reference move for `seat`, which knows both seats' values and the partner's
    /// schedule: accept an offer at least as good as the best split it can still get
    /// accepted, otherwise propose that split (now, if the partner takes it now).
    pub fn expert_move(&self, seat: Seat) -> Move {
        let deal = &self.deal;
        let other = seat.other();
        let accepted_at = |made: u32| {
            deal.splits()
                .into_iter()
                .filter(|k| deal.value(other, &deal.rest(k)) >= deal.aspiration(made))
                .max_by_key(|k| (deal.value(seat, k), deal.value(other, &deal.rest(k)), *k))
        };
        let offer = self.offer_to(seat).map(|m| deal.value(seat, &m));
        if self.proposals >= deal.max_proposals {
            return Move::Accept;
        }
        // My proposals are the ones numbered proposals+1, proposals+3, ... up to the limit.
        let last_mine = self.proposals + 1 + (deal.max_proposals - self.proposals - 1) / 2 * 2;
        let Some(target) = accepted_at(last_mine) else {
            return Move::Propose(deal.counts);
        };
        let target_value = deal.value(seat, &target);
        if offer.is_some_and(|v| v >= target_value) {
            return Move::Accept;
        }
        match accepted_at(self.proposals + 1) {
            Some(now) if deal.value(seat, &now) >= target_value => Move::Propose(now),
            _ => Move::Propose(target),
        }
    }
}
