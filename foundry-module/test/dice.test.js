import { test } from "node:test";
import assert from "node:assert/strict";
import { rollData } from "../scripts/logic/dice.js";

test("rollData: one Die term per group joined by +, the faces as active results, their sum as total", () => {
  const roll = rollData([{ faces: 6, results: [6, 1, 3] }, { faces: 20, results: [17] }]);
  assert.equal(roll.formula, "3d6 + 1d20");
  assert.equal(roll.total, 27);
  assert.equal(roll.evaluated, true);
  assert.deepEqual(roll.terms.map((term) => term.class), ["Die", "OperatorTerm", "Die"]);
  assert.deepEqual(roll.terms[0].results, [{ result: 6, active: true }, { result: 1, active: true }, { result: 3, active: true }]);
  assert.equal(roll.terms[2].faces, 20);
  assert.equal(roll.terms[2].number, 1);
});

test("rollData refuses what no die can show", () => {
  assert.throws(() => rollData([]), /at least one group/);
  assert.throws(() => rollData([{ faces: 6, results: [7] }]), /1\.\.6/);
  assert.throws(() => rollData([{ faces: 0, results: [1] }]), /positive whole number of faces/);
  assert.throws(() => rollData([{ faces: 100, results: [] }]), /1\.\.100/);
});
