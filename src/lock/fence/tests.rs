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
    let d = decide(set(&[0, 1, 2]), readings(&rs));
    assert_eq!((d.token, d.epoch, d.agreeing), (5, 7, set(&[0, 1, 2])));
}

#[test]
fn the_token_is_the_largest_counter_and_only_those_with_it_agree() {
    // A master ahead (lost races elsewhere raised it): the token is its
    // counter; the others must be written back.
    let rs = [(9, 7), (5, 7), (5, 7)];
    let d = decide(set(&[0, 1, 2]), readings(&rs));
    assert_eq!((d.token, d.epoch, d.agreeing), (9, 7, set(&[0])));
}

#[test]
fn masters_not_heard_do_not_count() {
    let rs = [(9, 7), (5, 7), (5, 7)];
    let d = decide(set(&[1, 2]), readings(&rs));
    assert_eq!((d.token, d.agreeing), (5, set(&[1, 2])));
}

#[test]
fn the_epoch_is_the_one_most_masters_report() {
    let rs = [(9, 3), (5, 7), (6, 7)];
    let d = decide(set(&[0, 1, 2]), readings(&rs));
    // The token is the largest counter in any epoch; the epoch the most
    // reported one; no master reported both: a write-back is needed.
    assert_eq!((d.token, d.epoch, d.agreeing), (9, 7, NodeSet::EMPTY));
    assert_eq!((d.in_epoch, d.other_epochs), (set(&[1, 2]), set(&[0])));
}

#[test]
fn a_tie_between_epochs_goes_to_the_one_with_the_token() {
    let rs = [(4, 3), (9, 8), (0, 0)];
    let d = decide(set(&[0, 1]), readings(&rs));
    assert_eq!((d.token, d.epoch, d.agreeing), (9, 8, set(&[1])));
}
