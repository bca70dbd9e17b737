use super::*;

fn readings(rs: &[(u64, u64)]) -> impl Fn(usize) -> Reading + '_ {
    move |i| Reading {
        counter: rs[i].0,
        epoch: rs[i].1,
        state: 1,
        ..Reading::default()
    }
}

fn set(is: &[usize]) -> NodeSet {
    let mut s = NodeSet::EMPTY;
    for &i in is {
        s.insert(i);
    }
    s
}

#[test]
fn agreeing_masters_make_the_token_final_at_once() {
    let rs = [(5, 7), (5, 7), (5, 7)];
    let d = decide(set(&[0, 1, 2]), 2, readings(&rs));
    assert_eq!((d.token, d.epoch, d.agreeing), (5, 7, set(&[0, 1, 2])));
}

#[test]
fn the_token_is_the_largest_counter_and_only_those_with_it_agree() {
    // Masters apart (lost races raised some): the token is the largest
    // counter; the others must be written back.
    let rs = [(9, 7), (5, 7), (6, 7)];
    let d = decide(set(&[0, 1, 2]), 2, readings(&rs));
    assert_eq!((d.token, d.epoch, d.agreeing), (9, 7, set(&[0])));
    // Of five, two agree at the largest: short of a quorum of three.
    let rs = [(9, 7), (9, 7), (5, 7), (6, 7), (4, 7)];
    let d = decide(set(&[0, 1, 2, 3, 4]), 3, readings(&rs));
    assert_eq!((d.token, d.agreeing), (9, set(&[0, 1])));
}

#[test]
fn a_quorum_agreeing_below_a_master_ahead_is_final_at_once_without_it() {
    // A master ahead (a standalone master's counter beside cluster
    // voters' slot counters, or lost races elsewhere): a quorum agrees on
    // a lower counter, which is the token; the master ahead is not counted.
    let rs = [(9, 7), (5, 7), (5, 7)];
    let d = decide(set(&[0, 1, 2]), 2, readings(&rs));
    assert_eq!((d.token, d.epoch, d.agreeing), (5, 7, set(&[1, 2])));
    assert_eq!(
        (d.in_epoch, d.other_epochs),
        (set(&[0, 1, 2]), NodeSet::EMPTY)
    );
    // Agreeing on a counter, but in two epochs: not a quorum; the
    // largest, written back.
    let rs = [(9, 7), (5, 7), (5, 8)];
    let d = decide(set(&[0, 1, 2]), 2, readings(&rs));
    assert_eq!((d.token, d.agreeing), (9, set(&[0])));
    // Of five: three agree below two ahead.
    let rs = [(9, 7), (8, 7), (5, 7), (5, 7), (5, 7)];
    let d = decide(set(&[0, 1, 2, 3, 4]), 3, readings(&rs));
    assert_eq!((d.token, d.agreeing), (5, set(&[2, 3, 4])));
}

#[test]
fn masters_not_heard_do_not_count() {
    let rs = [(9, 7), (5, 7), (5, 7)];
    let d = decide(set(&[1, 2]), 2, readings(&rs));
    assert_eq!((d.token, d.agreeing), (5, set(&[1, 2])));
}

#[test]
fn the_epoch_is_the_one_most_masters_report() {
    let rs = [(9, 3), (5, 7), (6, 7)];
    let d = decide(set(&[0, 1, 2]), 2, readings(&rs));
    // The token is the largest counter in any epoch; the epoch the most
    // reported one; no master reported both: a write-back is needed.
    assert_eq!((d.token, d.epoch, d.agreeing), (9, 7, NodeSet::EMPTY));
    assert_eq!((d.in_epoch, d.other_epochs), (set(&[1, 2]), set(&[0])));
}

#[test]
fn a_tie_between_epochs_goes_to_the_one_with_the_token() {
    let rs = [(4, 3), (9, 8), (0, 0)];
    let d = decide(set(&[0, 1]), 2, readings(&rs));
    assert_eq!((d.token, d.epoch, d.agreeing), (9, 8, set(&[1])));
}
