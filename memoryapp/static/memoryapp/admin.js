// memoryapp back office: a drop-down list filter navigates to the chosen choice.
"use strict";
document.addEventListener("change", function (event) {
  const select = event.target.closest("select.mem-filter-select");
  if (select && select.value) {
    window.location.href = select.value;
  }
});
