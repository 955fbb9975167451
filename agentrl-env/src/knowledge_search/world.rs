//! A seeded world of fictional people, towns, companies and inventions with made-up names,
//! linked by facts (birthplace, founder, seat, inventor, maker, river), so that no model can
//! know them without reading the corpus.

use std::collections::HashSet;

use agentrl_core::SeededRng;

/// Number of towns in a world.
pub const TOWNS: usize = 40;
/// Number of people in a world.
pub const PEOPLE: usize = 200;
/// Number of companies (each founded by a different person).
pub const COMPANIES: usize = 60;
/// Number of inventions.
pub const INVENTIONS: usize = 90;

/// Syllables that made-up words are built from.
const SYLLABLES: [&str; 48] = [
    "vel", "mor", "dask", "quill", "tarn", "ost", "ren", "bel", "cas", "dun", "ev", "fen", "gal",
    "hal", "ith", "jor", "kel", "lun", "mar", "nev", "or", "pel", "quen", "ros", "sil", "tor",
    "ul", "vor", "wen", "yar", "zel", "brin", "cor", "drav", "eld", "fal", "grim", "hest", "isk",
    "lor", "mab", "nor", "orv", "prax", "rask", "tav", "umb", "wyn",
];
/// Endings of first names.
const NAME_ENDINGS: [&str; 8] = ["a", "o", "in", "en", "ia", "us", "el", "ora"];
/// Endings of town names.
const TOWN_SUFFIXES: [&str; 8] = [
    "field", "holt", "mouth", "wick", "ford", "stead", "moor", "by",
];
/// Second words of company names.
const COMPANY_KINDS: [&str; 8] = [
    "Mills",
    "Works",
    "Foundry",
    "Instruments",
    "Brothers",
    "Company",
    "Ironworks",
    "Glassworks",
];
/// Second words of invention names.
const DEVICES: [&str; 10] = [
    "Loom",
    "Lamp",
    "Engine",
    "Press",
    "Valve",
    "Compass",
    "Pump",
    "Telegraph",
    "Kiln",
    "Lathe",
];
/// What people worked as.
const OCCUPATIONS: [&str; 8] = [
    "weaver",
    "surveyor",
    "glassblower",
    "clockmaker",
    "ferryman",
    "printer",
    "chemist",
    "engineer",
];

/// A person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Person {
    /// First and last name.
    pub name: String,
    /// Index of the town of birth.
    pub born_in: usize,
    /// Year of birth.
    pub born_year: i64,
    /// What the person worked as.
    pub occupation: &'static str,
}

/// A town.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Town {
    /// One word.
    pub name: String,
    /// The river the town lies on.
    pub river: String,
    /// Number of inhabitants.
    pub inhabitants: i64,
}

/// A company.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Company {
    /// A made-up word and a kind, e.g. `Quillbrook Mills`.
    pub name: String,
    /// Index of the person who founded it (no one founded two companies).
    pub founder: usize,
    /// Year of founding.
    pub founded_year: i64,
    /// Index of the town it is based in.
    pub based_in: usize,
    /// Number of workers.
    pub workers: i64,
}

/// An invention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invention {
    /// A made-up word and a device, e.g. `Brindle Loom`.
    pub name: String,
    /// Index of the inventor.
    pub inventor: usize,
    /// Index of the company that manufactures it.
    pub maker: usize,
    /// Year of invention.
    pub year: i64,
}

/// All entities of one world; every name is unique and no word is shared between kinds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct World {
    /// The people.
    pub people: Vec<Person>,
    /// The towns.
    pub towns: Vec<Town>,
    /// The companies.
    pub companies: Vec<Company>,
    /// The inventions.
    pub inventions: Vec<Invention>,
}

/// Draws made-up words, never the same word twice.
struct Words<'a> {
    rng: &'a mut SeededRng,
    used: HashSet<String>,
}

impl Words<'_> {
    /// A fresh capitalised word of `parts` syllables followed by `ending`.
    fn fresh(&mut self, parts: usize, endings: &[&str]) -> String {
        loop {
            let mut word = String::new();
            for _ in 0..parts {
                word.push_str(pick(self.rng, &SYLLABLES));
            }
            word.push_str(pick(self.rng, endings));
            if word.len() >= 4 && self.used.insert(word.clone()) {
                return capitalise(&word);
            }
        }
    }

    /// `n` fresh words.
    fn many(&mut self, n: usize, parts: usize, endings: &[&str]) -> Vec<String> {
        (0..n).map(|_| self.fresh(parts, endings)).collect()
    }
}

/// A uniformly chosen element of a non-empty list.
fn pick<'a>(rng: &mut SeededRng, items: &[&'a str]) -> &'a str {
    rng.choose(items).copied().unwrap_or_default()
}

/// A uniform index below `n` (`n > 0`).
fn index(rng: &mut SeededRng, n: usize) -> usize {
    rng.range(0, n as i64 - 1) as usize
}

/// `word` with its first letter in upper case.
fn capitalise(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

impl World {
    /// The world of `seed`; the same seed always gives the same world.
    pub fn generate(seed: u64) -> World {
        let mut rng = SeededRng::from_parts(&[seed, 0x0057_4f52_4c44]);
        let mut words = Words {
            rng: &mut rng,
            used: HashSet::new(),
        };
        let first_names = words.many(PEOPLE / 2, 1, &NAME_ENDINGS);
        let surnames = words.many(PEOPLE / 3, 1, &SYLLABLES);
        let town_names = words.many(TOWNS, 1, &TOWN_SUFFIXES);
        let rivers = words.many(TOWNS / 2, 2, &[""]);
        let company_stems = words.many(COMPANIES, 2, &[""]);
        let device_stems = words.many(INVENTIONS, 1, &NAME_ENDINGS);
        let rng = words.rng;

        let towns = town_names
            .into_iter()
            .map(|name| Town {
                name,
                river: rivers[index(rng, rivers.len())].clone(),
                inhabitants: rng.range(800, 60_000),
            })
            .collect();
        let mut names = HashSet::new();
        let mut people = Vec::with_capacity(PEOPLE);
        while people.len() < PEOPLE {
            let name = format!(
                "{} {}",
                first_names[index(rng, first_names.len())],
                surnames[index(rng, surnames.len())]
            );
            if names.insert(name.clone()) {
                people.push(Person {
                    name,
                    born_in: index(rng, TOWNS),
                    born_year: rng.range(1790, 1860),
                    occupation: pick(rng, &OCCUPATIONS),
                });
            }
        }
        let mut founders: Vec<usize> = (0..PEOPLE).collect();
        shuffle(rng, &mut founders);
        let companies: Vec<Company> = company_stems
            .into_iter()
            .zip(founders)
            .map(|(stem, founder)| Company {
                name: format!("{stem} {}", pick(rng, &COMPANY_KINDS)),
                founder,
                founded_year: people[founder].born_year + rng.range(20, 45),
                based_in: index(rng, TOWNS),
                workers: rng.range(12, 2400),
            })
            .collect();
        let inventions = device_stems
            .into_iter()
            .map(|stem| {
                let inventor = index(rng, PEOPLE);
                Invention {
                    name: format!("{stem} {}", pick(rng, &DEVICES)),
                    inventor,
                    maker: index(rng, COMPANIES),
                    year: people[inventor].born_year + rng.range(18, 50),
                }
            })
            .collect();
        World {
            people,
            towns,
            companies,
            inventions,
        }
    }

    /// The company `person` founded, if any.
    pub fn company_founded_by(&self, person: usize) -> Option<usize> {
        self.companies.iter().position(|c| c.founder == person)
    }
}

/// Fisher-Yates shuffle driven by `rng`.
fn shuffle<T>(rng: &mut SeededRng, items: &mut [T]) {
    for i in (1..items.len()).rev() {
        items.swap(i, index(rng, i + 1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worlds_are_seeded_and_names_unique() {
        let world = World::generate(3);
        assert_eq!(world, World::generate(3));
        assert_ne!(world, World::generate(4));
        let mut names = HashSet::new();
        for name in world
            .people
            .iter()
            .map(|p| &p.name)
            .chain(world.towns.iter().map(|t| &t.name))
            .chain(world.companies.iter().map(|c| &c.name))
            .chain(world.inventions.iter().map(|i| &i.name))
        {
            assert!(names.insert(name.clone()), "{name} twice");
        }
        let founders: HashSet<usize> = world.companies.iter().map(|c| c.founder).collect();
        assert_eq!(founders.len(), COMPANIES);
    }
}
